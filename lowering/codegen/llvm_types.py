"""LLVM types and constants of the CPU emitter, shared by the kernel
emitter (`llvm.py`) and its ops handler (`llvm_ops.py`): the LLVM type of
each IR type, in registers and in memory, constants, and numpy's NaN rule
for maximum/minimum."""

from __future__ import annotations

import platform

import llvmlite.ir as ir
from xdsl.dialects.builtin import (
    AnyFloat,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    Signedness,
)

X86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")

try:  # vectorized transcendentals (polynomials); else per-lane libm calls
    from . import llvm_math
except ImportError:  # pragma: no cover
    llvm_math = None  # type: ignore[assignment]

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
# No fast-math flags on element-wise arithmetic: without contraction into FMA,
# +,-,*,/ and sqrt round exactly as numpy's loops do, so compiled results are
# bitwise numpy's wherever numpy's own loops are IEEE-exact. (Reductions
# reassociate by construction: their accumulation order is ours.)
FM: tuple[str, ...] = ()


def llvm_type(t) -> ir.Type:
    if isinstance(t, Float32Type):
        return ir.FloatType()
    if isinstance(t, Float64Type):
        return ir.DoubleType()
    if isinstance(t, Float16Type):
        return ir.HalfType()
    if isinstance(t, IntegerType):
        return ir.IntType(t.width.data)
    if isinstance(t, IndexType):
        return I64
    raise TypeError(f"no LLVM type for {t}")


def mem_type(t) -> ir.Type:
    """In memory, numpy's bool is a byte."""
    lt = llvm_type(t)
    return I8 if lt == I1 else lt


def item_bytes(mt: ir.Type) -> int:
    """Bytes of one element in memory (also its natural alignment)."""
    if isinstance(mt, ir.IntType):
        return max(mt.width // 8, 1)
    return {"float": 4, "double": 8, "half": 2}[str(mt)]


def is_float(t) -> bool:
    return isinstance(t, AnyFloat)


def is_unsigned(t) -> bool:
    return isinstance(t, IntegerType) and (t.width.data == 1 or t.signedness.data == Signedness.UNSIGNED)


def vec(t: ir.Type, w: int) -> ir.Type:
    return t if w == 1 else ir.VectorType(t, w)


def const(t: ir.Type, v, w: int = 1):
    c = ir.Constant(t, v)
    return c if w == 1 else ir.Constant(ir.VectorType(t, w), [c] * w)


def parse_const(text: str, t) -> object:
    if text in ("true", "false"):
        return 1 if text == "true" else 0
    if is_float(t):
        return float(text)
    v = int(text)
    width = t.width.data
    return v & ((1 << width) - 1) if v < 0 else v


def np_extreme(cg, is_max: bool, t, a, x):
    """np.maximum(a, x) / np.minimum(a, x): a NaN in `a` wins, otherwise `a` only
    when strictly greater (smaller) — so a NaN in `x` wins too, and of two equal
    values (0.0 and -0.0) the second is returned, as numpy's loops do."""
    b = cg.b
    if is_float(t):
        keep = b.fcmp_ordered(">" if is_max else "<", a, x)
        keep = b.or_(keep, b.fcmp_unordered("uno", a, a))
        return b.select(keep, a, x)
    cmp = b.icmp_unsigned if is_unsigned(t) else b.icmp_signed
    return b.select(cmp(">" if is_max else "<", a, x), a, x)
