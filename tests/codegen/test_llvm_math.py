"""lowering.codegen.llvm_math against numpy: every function, both dtypes.

Each function is JIT-compiled (MCJIT, host CPU, -O3) inside a small kernel
`void k(T* in0[, T* in1], T* out, i64 n)` that runs the width-16 function over
whole vectors and the width-1 function over the tail, then compared with numpy
in ULPs (float bit patterns mapped to a monotone integer line; NaN must meet
NaN, and a zero must carry numpy's sign). Three kinds of inputs: dense sweeps
over the whole float range, every special value, and hypothesis examples.
"""

from __future__ import annotations

import ctypes
import re
import time
from functools import cache

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

llvm = pytest.importorskip("llvmlite.binding")
ir = pytest.importorskip("llvmlite.ir")

from lowering.codegen.llvm_math import SUPPORTED, ULP_BOUND, math_function  # noqa: E402
from lowering.testing import examples  # noqa: E402

WIDTH = 16
DTYPES = {"f32": np.float32, "f64": np.float64}
UNARY = sorted(n for n, k in SUPPORTED.items() if k == 1)
BINARY = sorted(n for n, k in SUPPORTED.items() if k == 2)
NUMPY = {n: getattr(np, n) for n in SUPPORTED}
LIBM = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "sinh", "cosh",
        "sin", "cos", "tan", "atan", "asin", "acos", "atan2", "pow", "cbrt", "erf"}


# ---------------------------------------------------------------- JIT harness
def _kernel(module: ir.Module, name: str, dtype: str) -> None:
    """void k_<name>(T* in..., T* out, i64 n): vectors of WIDTH, then a scalar tail."""
    fv = math_function(module, name, dtype, WIDTH)
    f1 = math_function(module, name, dtype, 1)
    t = f1.function_type.return_type
    vt, i64 = ir.VectorType(t, WIDTH), ir.IntType(64)
    arity = SUPPORTED[name]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [t.as_pointer()] * (arity + 1) + [i64]),
                     f"k_{name}")
    ins, out, n = fn.args[:arity], fn.args[arity], fn.args[arity + 1]
    entry, vloop, vbody, tloop, tbody, done = (fn.append_basic_block(s) for s in
                                               ("entry", "vloop", "vbody", "tloop", "tbody", "done"))
    b = ir.IRBuilder(entry)
    nvec = b.mul(b.sdiv(n, ir.Constant(i64, WIDTH)), ir.Constant(i64, WIDTH))
    b.branch(vloop)

    def loop(head, body, start, stop, step, call):
        b.position_at_end(head)
        i = b.phi(i64)
        i.add_incoming(start, head_pred[head])
        b.cbranch(b.icmp_signed("<", i, stop), body, head_next[head])
        b.position_at_end(body)
        call(i)
        nxt = b.add(i, ir.Constant(i64, step))
        i.add_incoming(nxt, b.block)
        b.branch(head)

    def vcall(i):
        args = [b.load(b.bitcast(b.gep(p, [i]), vt.as_pointer()), align=4) for p in ins]
        b.store(b.call(fv, args), b.bitcast(b.gep(out, [i]), vt.as_pointer()), align=4)

    def scall(i):
        b.store(b.call(f1, [b.load(b.gep(p, [i])) for p in ins]), b.gep(out, [i]))

    head_pred = {vloop: entry, tloop: vloop}
    head_next = {vloop: tloop, tloop: done}
    loop(vloop, vbody, ir.Constant(i64, 0), nvec, WIDTH, vcall)
    loop(tloop, tbody, nvec, n, 1, scall)
    b.position_at_end(done)
    b.ret_void()


class _Jit:
    def __init__(self, dtype: str):
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        module = ir.Module(f"llvm_math_{dtype}")
        module.triple = llvm.get_process_triple()
        for name in SUPPORTED:
            _kernel(module, name, dtype)
        self.tm = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3)
        mod = llvm.parse_assembly(str(module))
        mod.verify()
        pb = llvm.create_pass_builder(self.tm, llvm.create_pipeline_tuning_options(speed_level=3))
        pb.getModulePassManager().run(mod, pb)
        self.optimized_ir = str(mod)
        self.asm = self.tm.emit_assembly(mod)
        self.engine = llvm.create_mcjit_compiler(mod, self.tm)
        self.engine.finalize_object()
        self.np_dtype = DTYPES[dtype]
        self.fns = {}
        for name, arity in SUPPORTED.items():
            proto = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (arity + 1), ctypes.c_int64)
            self.fns[name] = proto(self.engine.get_function_address(f"k_{name}"))

    def __call__(self, name: str, *xs: np.ndarray) -> np.ndarray:
        xs = tuple(np.ascontiguousarray(x, dtype=self.np_dtype) for x in xs)
        xs = np.broadcast_arrays(*xs)
        xs = tuple(np.ascontiguousarray(x) for x in xs)
        out = np.empty_like(xs[0])
        self.fns[name](*[x.ctypes.data for x in xs], out.ctypes.data, out.size)
        return out


@cache
def jit(dtype: str) -> _Jit:
    return _Jit(dtype)


# ---------------------------------------------------------------- ULPs
def ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in ULPs; 0 for NaN vs NaN, huge for NaN vs number or for a
    zero of the wrong sign."""
    ity = np.int32 if got.dtype == np.float32 else np.int64
    big = np.iinfo(ity).max

    def line(a):  # monotone integer line, -0.0 and +0.0 both at 0
        i = a.view(ity).astype(np.int64)
        return np.where(i < 0, -(i & big), i)

    lg, lw = line(got), line(want)
    same_side = (lg >= 0) == (lw >= 0)  # int64 difference cannot overflow
    d = np.where(same_side, np.abs(np.where(same_side, lg - lw, 0)).astype(np.float64),
                 np.abs(lg.astype(np.float64)) + np.abs(lw.astype(np.float64)))
    gn, wn = np.isnan(got), np.isnan(want)
    d[gn & wn] = 0
    d[gn ^ wn] = np.inf
    zero_sign = (want == 0) & (got == 0) & (np.signbit(got) != np.signbit(want))
    d[zero_sign] = np.inf
    return d


def reference(name: str, *xs: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return NUMPY[name](*xs)


def check(name: str, dtype: str, *xs: np.ndarray, bound: float | None = None) -> float:
    t = DTYPES[dtype]
    xs = tuple(np.asarray(x, dtype=t) for x in xs)
    got = jit(dtype)(name, *xs)
    want = reference(name, *np.broadcast_arrays(*xs)).astype(t)
    d = ulp_distance(got, want)
    worst = int(np.argmax(d))
    limit = ULP_BOUND[(name, dtype)] if bound is None else bound
    if d[worst] > limit:
        args = ", ".join(repr(np.broadcast_arrays(*xs)[k][worst]) for k in range(len(xs)))
        pytest.fail(f"{name}[{dtype}]({args}) = {got[worst]!r}, numpy {want[worst]!r}: "
                    f"{d[worst]} ULP > {limit} ({int(np.sum(d > limit))} of {d.size} over)")
    return float(d.max())


# ---------------------------------------------------------------- inputs
def special_values(dtype: str) -> np.ndarray:
    t = DTYPES[dtype]
    fi = np.finfo(t)
    base = [0.0, 1.0, 2.0, 3.0, 0.5, 0.25, 1.5, 10.0, 100.0, 1e-3, 1e-10, 1e10, 1e30,
            np.pi, np.pi / 2, np.pi / 4, 3 * np.pi / 4, 2 * np.pi, 1e5 * np.pi, 0.41421356, 2.41421356,
            np.inf, fi.max, fi.tiny, fi.smallest_subnormal, fi.smallest_subnormal * 3, fi.tiny / 2,
            fi.eps, fi.epsneg, 1 - fi.epsneg, 1 + fi.eps, 88.72283, 88.72284, 88.7229, 89.41599,
            89.4160, 103.97, 103.98, 104.0, 87.33654, 87.3366, 709.78271289338397, 709.7828,
            710.4758600739439, 710.476, 745.1332191019411, 745.14, 744.44, 708.39, 127.0, 128.0,
            149.0, 150.0, 151.0, 1022.0, 1023.0, 1024.0, 1074.0, 1075.0, 1076.0, 9.01, 9.02, 19.06,
            20.0, 0.55, 0.4, 2.0**19, 2.0**19 + 1, 2.0**20, 2.0**30, 2.0**52, 2.0**60, 17.0, 44.0]
    v = np.array(base, dtype=np.float64)
    v = np.concatenate([v, np.nextafter(v, np.inf), np.nextafter(v, -np.inf)])
    with np.errstate(all="ignore"):
        v = v.astype(t)
    v = np.concatenate([v, -v, np.array([np.nan, -np.nan], dtype=t)])
    return v


def sweep(dtype: str, n: int, seed: int = 0) -> np.ndarray:
    """n values: log-uniform magnitudes from the smallest subnormal to the
    largest finite, both signs, plus dense [-20, 20] and [-1, 1]."""
    t = DTYPES[dtype]
    fi = np.finfo(t)
    rng = np.random.default_rng(seed)
    k = n // 2
    mag = np.exp(rng.uniform(np.log(float(fi.smallest_subnormal)), np.log(float(fi.max)), k))
    mag *= rng.choice([-1.0, 1.0], k)
    mid = rng.uniform(-20, 20, (n - k) // 2)
    small = rng.uniform(-1, 1, n - k - mid.size)
    with np.errstate(over="ignore"):
        return np.concatenate([mag, mid, small]).astype(t)
