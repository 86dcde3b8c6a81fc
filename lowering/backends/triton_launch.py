"""Loading, compiling and running the Triton emitter's kernels
(`lowering/codegen/triton_kernel.py`'s `TritonKernel`) — what the tests need before a GPU runtime
exists: every kernel compiled for a CUDA target on a machine without a GPU
(`compile_for`), and run on numpy arrays by Triton's interpreter
(`interpret`).

Triton's `@jit` reads a function's source with `inspect.getsource`, so a
generated module is registered in `linecache` under a name of its own
(`<lowering-triton ...>`) and executed from there: nothing is written to disk.

The interpreter runs a kernel as numpy code on host memory, with its
arguments' `data_ptr()` as addresses. It expects torch tensors (it copies
them "to the host" through their storages); `HostArray` is the few methods
of that protocol over a numpy array, so no torch is needed. libdevice
functions have no interpreter implementation: an interpreted module's
`libdevice` is `INTERPRETER_LIBDEVICE`, numpy's functions of the same
meaning (so the interpreter checks the emitter's rules, not libdevice's
accuracy; the GPU tests check that). triton is imported only here, and
only when a function is called."""

from __future__ import annotations

import atexit
import hashlib
import linecache
import os
import threading
import types
from collections.abc import Sequence

import numpy as np

from runtime.gpu import HostArray

from ..codegen.triton_kernel import TritonKernel

_MODULES: dict[tuple[str, bool], dict] = {}


def load(tk: TritonKernel, interpret: bool = False):
    """The @triton.jit function of a generated kernel (Triton's interpreter's
    version with `interpret`); one module per distinct source and mode."""
    key = (tk.source, interpret)
    g = _MODULES.get(key)
    if g is None:
        _import_triton(interpret)
        digest = hashlib.sha256(tk.source.encode()).hexdigest()[:16]
        name = f"<lowering-triton {tk.fn_name} {digest}{' interpreted' if interpret else ''}>"
        lines = tk.source.splitlines(True)
        linecache.cache[name] = (len(tk.source), None, lines, name)
        g = {"__name__": f"lowering_triton_{digest}"}
        before = os.environ.get("TRITON_INTERPRET")
        os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"  # read by @triton.jit
        try:
            exec(compile(tk.source, name, "exec"), g)
        finally:
            if before is None:
                del os.environ["TRITON_INTERPRET"]
            else:
                os.environ["TRITON_INTERPRET"] = before
        if interpret:
            g["libdevice"] = INTERPRETER_LIBDEVICE
            _exact_bfloat16_conversions()
        _MODULES[key] = g
    return g[tk.fn_name]


_PATCHED: list[bool] = []


def _exact_bfloat16_conversions() -> None:
    """Triton's interpreter converts float32 to bfloat16 by truncation (and
    loses NaN, infinities and subnormals both ways), where the GPU's
    `cvt.rn.bf16.f32` rounds to nearest even: its conversions between the
    two are replaced by ml_dtypes' (round to nearest even, NaN kept), once,
    so that the interpreter computes what the device does."""
    if _PATCHED:
        return
    import ml_dtypes
    import triton.language as tl
    from triton.runtime import interpreter as I

    bf16 = np.dtype(ml_dtypes.bfloat16)
    B = I.InterpreterBuilder

    def convert(src, dst_type):
        s, d = src.dtype.scalar, dst_type.scalar
        if s == tl.bfloat16 and d == tl.float32:
            return I.TensorHandle(src.data.view(bf16).astype(np.float32), tl.float32)
        if s == tl.float32 and d == tl.bfloat16:
            data = np.asarray(src.data, np.float32).astype(bf16).view(np.uint16)
            return I.TensorHandle(data, tl.bfloat16)
        return None

    cast_impl, fp_to_fp = B.cast_impl, B.create_fp_to_fp

    def exact_cast(self, src, dst_type):
        r = convert(src, dst_type)
        return r if r is not None else cast_impl(self, src, dst_type)

    def exact_fp_to_fp(self, src, dst_type, rounding_mode):
        r = convert(src, dst_type)
        return r if r is not None else fp_to_fp(self, src, dst_type, rounding_mode)

    B.cast_impl = exact_cast
    for name in ("create_fp_ext", "create_fp_trunc"):
        setattr(B, name, exact_cast)
    B.create_fp_to_fp = exact_fp_to_fp
    _PATCHED.append(True)


def _import_triton(interpret: bool) -> None:
    """Triton's own modules, imported with TRITON_INTERPRET unset: imported
    first while it is set (below), its library functions (`tl.cdiv`, ...)
    would be interpreter functions for good, and a later import of its
    experimental modules (which the interpreter's argument handling does)
    fails on them. (Those experimental modules, ~0.2 s to import, only
    where the interpreter runs.) Then Triton's own cache key, once
    (`_seed_triton_key`)."""
    import triton.language  # noqa: F401

    if interpret:
        try:
            import triton.experimental.gluon  # noqa: F401
        except ImportError:
            pass
    _seed_triton_key()


_SEED_LOCK = threading.Lock()  # (a compile waits for warm_up's seeding rather than seed too)
_WARM: list[threading.Thread] = []
_BACKGROUND: list[threading.Thread] = []
_BACKGROUND_LOCK = threading.Lock()
EXIT_WAIT_S = 60.0  # the longest the exit (or a first compile) waits for such a thread


def background(work, name: str) -> threading.Thread:
    """`work()` started in a daemon thread that the interpreter's exit waits
    for (`_finish_background`, at most `EXIT_WAIT_S` each): Triton's builds
    (its driver's C module, a kernel's launcher) run the system's C
    compiler in a temporary folder; a daemon thread stopped at exit by the
    end of the process leaves that compiler and linker running on a folder
    already removed (linker errors printed after a short script's end)."""
    t = threading.Thread(target=work, name=name, daemon=True)
    with _BACKGROUND_LOCK:
        if not _BACKGROUND:
            atexit.register(_finish_background)
        _BACKGROUND[:] = [b for b in _BACKGROUND if b.is_alive()] + [t]
    t.start()
    return t


def _finish_background() -> None:
    for t in list(_BACKGROUND):
        if t.is_alive() and t is not threading.current_thread():
            t.join(EXIT_WAIT_S)


def wait_for_warm_up() -> None:
    """Before a first compile: the warm-up thread's work finished (Triton's
    import, key and driver utilities, which the compile needs too), so that
    the two do not build the driver's C module at once (twice the system
    compiler's 0.4 s, side by side on a cold machine). At most
    EXIT_WAIT_S: a warm-up stuck in the driver leaves the compile to do the
    work itself."""
    for t in _WARM:
        if t.is_alive() and t is not threading.current_thread():
            t.join(EXIT_WAIT_S)


def warm_up() -> None:
    """Start, once per process and in a thread of its own, what the first
    compile of a GPU program waits for besides the program itself: Triton's
    import (its compiler's modules too), its cache key (`_seed_triton_key`:
    a few ms of reading file sizes and times) and its CUDA driver's
    utilities (a C module Triton builds with the system compiler the first
    time on a machine, 0.25 s) — so that they run while the call is traced and lowered
    (`device_call.call`: the first call on a device's arrays) instead of
    after. The thread imports with TRITON_INTERPRET unset, so it is started
    only for a device that runs compiled kernels (never under
    LOWERING_GPU=interpret, whose loads set that variable); a failure leaves
    the compile to do the same work and report it."""
    if _WARM:
        return

    def work():
        try:
            _import_triton(False)
            # the compiler's modules (its code generator imports Triton's
            # experimental language: 0.4 s of a cold call's first compile)
            import triton.compiler.code_generator  # noqa: F401
            import triton.compiler.compiler  # noqa: F401
            from triton.runtime import driver

            driver.active.get_current_device()
        except Exception:  # (the compile meets it again, and says so)
            pass
    _WARM.append(background(work, "lowering-triton-warm-up"))


_SEEDED: list[bool] = []


def _seed_triton_key() -> None:
    with _SEED_LOCK:
        _seed_triton_key_once()


def _seed_triton_key_once() -> None:
    """Triton keys every compile by `triton.runtime.cache.triton_key()`: a
    hash of its compiler's and language's source files and of its 100+ MB
    library, computed once per process (0.35-0.7 s: most of the time a
    first compile in a fresh process waited for, besides Triton's own
    compile). The key need only change when the installation does: here it
    is a digest of Triton's version and of those files' paths, sizes and
    modification times (a few ms), in place of Triton's hash, whatever the
    disk caches hold. (A compile keyed so finds in Triton's on-disk cache
    the kernels other processes of this package compiled with this Triton,
    not those of processes using Triton's own key.)"""
    if _SEEDED:
        return
    _SEEDED.append(True)
    try:
        import triton
        import triton.runtime.cache as tc
        from runtime import disk_cache

        tc.triton_key = _installation_key(triton, disk_cache.digest)
    except Exception:  # (Triton hashes its files itself)
        return


_NOT_CODE = {"include", "lib", "bin", "__pycache__"}  # (headers, CUDA's tools and libraries)


def _installation_key(triton, digest):
    """The function `_seed_triton_key_once` puts in place of Triton's."""
    root = os.path.dirname(os.path.abspath(triton.__file__))
    stats = []
    for sub in ("compiler", "backends", "language", "_C", "runtime"):
        for dirpath, dirs, files in os.walk(os.path.join(root, sub)):
            dirs[:] = sorted(d for d in dirs if d not in _NOT_CODE)
            for name in sorted(files):
                if name.endswith((".py", ".so")):
                    st = os.stat(os.path.join(dirpath, name))
                    stats.append((os.path.relpath(os.path.join(dirpath, name), root),
                                  st.st_size, st.st_mtime_ns))
    value = "lowering-" + digest({"kind": "triton-key", "root": root,
                                  "version": triton.__version__, "files": stats})
    return lambda: value


def compile_for(tk: TritonKernel, arch: int = 90, warp_size: int = 32):
    """triton.compile of the kernel for CUDA compute capability `arch` (no
    GPU needed): the CompiledKernel, its `asm` holding ttir, ttgir, llir,
    ptx and cubin."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src = ASTSource(load(tk), tk.signature(), constexprs=dict(tk.constexprs))
    return triton.compile(src, target=GPUTarget("cuda", arch, warp_size),
                          options={"num_warps": tk.num_warps, **tk.options})


# ---- launch values -----------------------------------------------------------------

def arg_values(tk: TritonKernel, arrays: Sequence) -> dict[str, object]:
    """Each run-time argument's value but the buffers': strides (elements)
    from the arrays, parameters from the kernel's launch values."""
    out: dict[str, object] = {}
    for a in tk.args:
        if a.kind == "stride":
            x = arrays[a.index]
            out[a.name] = int(x.strides[a.dim] // x.itemsize) if isinstance(x, np.ndarray) \
                else int(x.stride(a.dim))
        elif a.kind == "param":
            out[a.name] = param_value(tk.param_values[a.index], a.sig)
        elif a.kind == "extent":
            out[a.name] = tk.first_extent
    return out


def param_value(text: str, sig: str):
    if text in ("true", "false"):
        return text == "true"
    if sig.startswith("fp") or sig == "bf16":
        return float(text)
    return int(text)


# ---- the interpreter -----------------------------------------------------------------

def _tl_dtype(sig: str):
    import triton.language as tl

    names = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64",
             "i1": "int1"}
    c = sig.lstrip("*")
    return getattr(tl, names.get(c, ("uint" if c[0] == "u" else "int") + c[1:]))


def interpret(tk: TritonKernel, arrays: Sequence[np.ndarray]) -> None:
    """Run the kernel with Triton's interpreter on numpy arrays (the kernel's
    buffers, in operand order), in place. A gather's index out of range
    raises IndexError after the kernel (`check_status`)."""
    fn = load(tk, interpret=True)
    values = arg_values(tk, arrays)
    n = tk.programs(values)
    if n == 0:
        return
    status = np.zeros(1, np.int32)
    args = [HostArray(arrays[a.index], _tl_dtype(a.sig)) if a.kind == "buffer"
            else HostArray(status, _tl_dtype(a.sig)) if a.kind == "status" else values[a.name]
            for a in tk.args]
    with np.errstate(all="ignore"):
        fn[(n,)](*args, **tk.constexprs)
    check_status(tk, int(status[0]))


def check_status(tk: TritonKernel, status: int) -> None:
    """Raise IndexError where a kernel's `status` says one of its gathers
    met an index out of range (the check's number + 1; 0: none did)."""
    if status:
        raise IndexError(f"an index out of range in kernel {tk.name!r} (gather {status - 1})")


def _libdevice_shim() -> types.SimpleNamespace:
    """numpy's functions for the libdevice names the emitter uses, on the
    interpreter's tensors."""
    def wrap(f):
        def run(*xs):
            import triton.language as tl
            from triton.runtime.interpreter import TensorHandle

            data = [x.handle.data for x in xs]
            first = xs[0]
            ty = max((x.type for x in xs), key=lambda t: len(getattr(t, "shape", ())))
            with np.errstate(all="ignore"):
                r = np.asarray(f(*data)).astype(data[0].dtype)
            return tl.tensor(TensorHandle(r, first.handle.dtype.scalar), ty)
        return run

    fns = {"cbrt": np.cbrt, "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log,
           "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sin": np.sin, "cos": np.cos,
           "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
           "atan2": np.arctan2, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
           "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "pow": np.power,
           "hypot": np.hypot, "copysign": np.copysign, "trunc": np.trunc, "rint": np.rint,
           "fmod": np.fmod, "ldexp": np.ldexp}
    return types.SimpleNamespace(**{k: wrap(f) for k, f in fns.items()})


INTERPRETER_LIBDEVICE = _libdevice_shim()


def launch(tk: TritonKernel, tensors: Sequence) -> None:
    """Run the compiled kernel on torch device tensors, the kernel's buffers
    in operand order (a gather's index out of range: IndexError after it)."""
    import torch

    fn = load(tk)
    values = arg_values(tk, tensors)
    n = tk.programs(values)
    if n == 0:
        return
    status = None
    if any(a.kind == "status" for a in tk.args):
        status = torch.zeros(1, dtype=torch.int32, device=tensors[0].device)
    args = [tensors[a.index] if a.kind == "buffer" else status if a.kind == "status"
            else values[a.name] for a in tk.args]
    fn[(n,)](*args, **tk.constexprs, num_warps=tk.num_warps, **tk.options)
    if status is not None:
        check_status(tk, int(status.item()))


def run_module(module, inputs: Sequence[np.ndarray], device: str | None = None
               ) -> list[np.ndarray]:
    """The results of a kernel-level module's (first) function with every
    kernel run by Triton's interpreter on numpy arrays (`device` None: the
    loop-level interpreter's walk, `backends/interpreter.py`, with Triton
    kernels), or compiled on a torch device (`device="cuda"`: the inputs
    copied there and the results back). Buffers from `memref.alloc` start as
    the interpreter's poison, so a kernel that leaves an element unwritten
    shows it. The inputs must have the layouts the module was lowered for
    (`lowering.layout`: C-contiguous for "C")."""
    from xdsl.dialects import func, memref
    from xdsl.dialects.builtin import MemRefType

    from dialects import kernel as K
    from dialects import loop as L

    from ..codegen.triton_kernel import emit_kernel, no_rule
    from .interpreter import poison
    from .numpy_ops import dtype_of

    if device is None:
        to, back = np.asarray, (lambda x: x)
    else:
        import torch

        def to(x):
            return torch.from_numpy(np.asarray(x)).to(device)  # (its strides kept)

        def back(x):
            return x.cpu().numpy()
    f = next(o for o in module.ops if isinstance(o, func.FuncOp))
    block = f.body.blocks[0]
    bufs = {a: to(x) for a, x in zip(block.args, inputs)}
    for op in block.ops:
        if isinstance(op, memref.AllocOp):
            t = op.memref.type
            assert isinstance(t, MemRefType)
            bufs[op.memref] = to(poison(t.get_shape(), dtype_of(t.element_type)))
        elif isinstance(op, memref.CastOp):
            bufs[op.dest] = bufs[op.source]
        elif isinstance(op, K.KernelOp):
            tk = emit_kernel(op)
            ins = [bufs[b] for b in op.buffers]
            interpret(tk, ins) if device is None else launch(tk, ins)
        elif isinstance(op, func.ReturnOp):
            return [back(bufs[v]) for v in op.arguments]
        elif isinstance(op, L.ExternOp):
            raise no_rule(f"loop.extern {op.fn.data!r}")
        else:
            raise no_rule(f"{op.name} at function level")
    raise AssertionError("no func.return")
