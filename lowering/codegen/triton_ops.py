"""The ops handler for Triton (`TritonOps`, an implementation of
`lowering/codegen/ops.py`'s protocol): numpy's meaning of every scalar op of
a kernel body, as Triton-language expression text.

A value is the name of a variable of the generated function (or a short
expression); the handler asks its kernel emitter (`triton_kernel`) for a new
variable whenever a rule needs an intermediate (`let`), and for the IR type
of a variable (`type_of`: the predicates of `arith.cmpi` read the operands'
signedness). Rules longer than a line are `@triton.jit` helpers (`HELPERS`)
that the generated module defines once; a rule names the ones it calls
(`use`).

The numpy meanings that Triton's own operators do not have, and how they
are kept:
- float32 division and square root are IEEE's (`tl.div_rn`, `tl.sqrt_rn`;
  Triton's `/` and `tl.sqrt` are approximate on float32); float64's `/` and
  `tl.sqrt` are IEEE already. Kernels compile with FP contraction off
  (`OPTIONS`): numpy rounds every multiply and add; and with libdevice's
  flush-to-zero off (Triton turns it on by default): numpy keeps subnormal
  inputs and results of floor, cbrt, pow, atan2, ...
- negation flips the sign bit (Triton's unary minus is `0 - x`, which
  makes -(+0.0) +0.0 where numpy gives -0.0).
- float fmod is libdevice's (Triton's `%` on floats is `a - b*trunc(a/b)`,
  NaN for fmod(x, ±inf) where C gives x); remainder and floor_divide
  build on it.
- transcendental functions are libdevice's (`libdevice.exp`, ...), not
  Triton's `tl.exp` (an `ex2.approx` whose error grows with |x|); float16
  functions compute in float32 and round once, as numpy's loops do.
- maximum/minimum propagate NaN and return the second operand of equal
  ones (the LLVM emitter's `np_extreme`); fmax/fmin ignore a NaN operand.
- integer floor_divide/remainder have Python's signs, give 0 for a zero
  divisor and never trap (INT_MIN // -1 is INT_MIN); float ones are numpy's
  npy_divmod; Triton's own `//` and `%` are C's.
- shifts by a count past the width (or negative) shift every bit out.
- float -> int casts give x86's "integer indefinite" (INT_MIN) for NaN and
  out-of-range values, as the CPU backend does (PTX's cvt saturates).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    Signedness,
)
from xdsl.ir import Attribute
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineSymExpr,
)

from dialects import ufuncs as U
from dialects.dtypes import from_ir

from .ops import ScalarOps, UfuncRule, UpstreamRule

# options every generated kernel compiles with (triton.compile / a launch)
OPTIONS = {"enable_fp_fusion": False, "enable_reflect_ftz": False}


# ---- types -----------------------------------------------------------------------

def is_float(t: Attribute) -> bool:
    return isinstance(t, (Float16Type, Float32Type, Float64Type, BFloat16Type))


def is_half(t: Attribute | None) -> bool:
    """float16 or bfloat16: values a kernel loads and stores in their type
    and computes on in float32 (`TritonOps.ufunc`)."""
    return isinstance(t, (Float16Type, BFloat16Type))


def is_unsigned(t: Attribute) -> bool:
    return isinstance(t, IntegerType) and t.signedness.data == Signedness.UNSIGNED


def is_bool(t: Attribute) -> bool:
    return isinstance(t, IntegerType) and t.width.data == 1


def width(t: Attribute) -> int:
    if isinstance(t, IntegerType):
        return t.width.data
    return {Float16Type: 16, BFloat16Type: 16, Float32Type: 32, Float64Type: 64}[type(t)]


def type_code(t: Attribute, index_bits: int = 64) -> str:
    """Triton's short name of an element type (its signature spelling: fp32,
    i64, u8, i1); `index` is the kernel's index width."""
    if isinstance(t, IndexType):
        return f"i{index_bits}"
    if isinstance(t, IntegerType):
        w = t.width.data
        return "i1" if w == 1 else f"{'u' if is_unsigned(t) else 'i'}{w}"
    return {Float16Type: "fp16", BFloat16Type: "bf16", Float32Type: "fp32",
            Float64Type: "fp64"}[type(t)]


_TL_NAMES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64",
             "i1": "int1"}


def tl_dtype(t: Attribute, index_bits: int = 64) -> str:
    """The `tl.` dtype of an element type, as source text."""
    c = type_code(t, index_bits)
    if c in _TL_NAMES:
        return f"tl.{_TL_NAMES[c]}"
    return f"tl.{'uint' if c[0] == 'u' else 'int'}{c[1:]}"


def int_dtype(bits: int, unsigned: bool = False) -> str:
    return f"tl.{'uint' if unsigned else 'int'}{bits}"


def literal(value: float | int | bool, t: Attribute) -> str:
    """A Python literal of `value` for type t (NaN and infinities through the
    prelude's constexprs)."""
    if is_bool(t):
        return "1" if value else "0"
    if is_float(t):
        v = float(value)
        if math.isnan(v):
            return "_NAN"
        if math.isinf(v):
            return "_INF" if v > 0 else "-_INF"
        return repr(v)
    return str(int(value))


# ---- helpers: @triton.jit functions the generated module defines when used ----
# `_DIV(` stands for the IEEE division of the helper's float type
# (a helper is generated once per float type it is used with: name + "_f32")

HELPERS: dict[str, str] = {
    # (Triton's own library functions, tl.zeros_like and tl.sum among them, are
    # @jit functions that its interpreter runs only when TRITON_INTERPRET was set
    # before triton was imported: the generated code calls builtins and these)
    "_zeros_like": '''
@triton.jit
def _zeros_like(a):
    return tl.full(a.shape, 0, a.dtype)
''',
    "_np_max": '''
@triton.jit
def _np_max(a, b):
    # np.maximum: a NaN wins; of equal values the second
    return tl.where((a > b) | (a != a), a, b)
''',
    "_np_min": '''
@triton.jit
def _np_min(a, b):
    return tl.where((a < b) | (a != a), a, b)
''',
    "_np_fmax": '''
@triton.jit
def _np_fmax(a, b):
    # np.fmax: a NaN operand is ignored (NaN only when both are)
    m = tl.where((a > b) | (a != a), a, b)
    return tl.where(a != a, b, tl.where(b != b, a, m))
''',
    "_np_fmin": '''
@triton.jit
def _np_fmin(a, b):
    m = tl.where((a < b) | (a != a), a, b)
    return tl.where(a != a, b, tl.where(b != b, a, m))
''',
    "_np_sign": '''
@triton.jit
def _np_sign(a):
    z = _zeros_like(a)
    r = tl.where(a > 0, z + 1, tl.where(a < 0, z - 1, z))
    return tl.where(a != a, a, r)
''',
    "_np_floordiv_int": '''
@triton.jit
def _np_floordiv_int(a, b):
    # Python's floor division; 0 for a zero divisor; INT_MIN // -1 is INT_MIN
    ydz = b == 0
    m1 = b == -1
    safe = tl.where(ydz | m1, 1, b)
    q = a // safe
    r = a % safe
    q = tl.where(m1, -a, q)
    q = tl.where((r != 0) & ((r < 0) != (b < 0)) & (m1 == 0), q - 1, q)
    return tl.where(ydz, 0, q)
''',
    "_np_remainder_int": '''
@triton.jit
def _np_remainder_int(a, b):
    # Python's modulo (the divisor's sign); 0 for a zero divisor and for -1
    ydz = b == 0
    m1 = b == -1
    safe = tl.where(ydz | m1, 1, b)
    r = a % safe
    r = tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
    return tl.where(ydz | m1, 0, r)
''',
    "_np_fmod_int": '''
@triton.jit
def _np_fmod_int(a, b):
    # C's remainder; 0 for a zero divisor and for -1
    ydz = b == 0
    m1 = b == -1
    safe = tl.where(ydz | m1, 1, b)
    return tl.where(ydz | m1, 0, a % safe)
''',
    "_np_floordiv_uint": '''
@triton.jit
def _np_floordiv_uint(a, b):
    ydz = b == 0
    return tl.where(ydz, 0, a // tl.where(ydz, 1, b))
''',
    "_np_remainder_uint": '''
@triton.jit
def _np_remainder_uint(a, b):
    ydz = b == 0
    return tl.where(ydz, 0, a % tl.where(ydz, 1, b))
''',
    "_np_remainder_f": '''
@triton.jit
def _np_remainder_f(a, b):
    # numpy's npy_divmod, from C's fmod
    mod = libdevice.fmod(a, b)
    z = _zeros_like(mod)
    mod_nz = mod != 0
    fix = mod_nz & ((b < 0) != (mod < 0))
    m = tl.where(fix, mod + b, mod)
    m = tl.where(mod_nz, m, libdevice.copysign(z, b))
    return tl.where(b == 0, mod, m)
''',
    "_np_floordiv_f": '''
@triton.jit
def _np_floordiv_f(a, b):
    mod = libdevice.fmod(a, b)
    z = _zeros_like(mod)
    fix = (mod != 0) & ((b < 0) != (mod < 0))
    div = _DIV(a - mod, b)
    div = tl.where(fix, div - 1.0, div)
    fl = tl.floor(div)
    fl = tl.where(div - fl > 0.5, fl + 1.0, fl)
    q = _DIV(a, b)
    r = tl.where(div != 0, fl, libdevice.copysign(z, q))
    return tl.where(b == 0, q, r)
''',
    "_np_hypot_f64": '''
@triton.jit
def _np_hypot_f64(a, b):
    # C's hypot without overflow: the larger magnitude times sqrt(1 + q*q)
    # (libdevice's float64 hypot gives inf for hypot(DBL_MAX, 1)); inf wins
    # over NaN, as in C
    x = tl.abs(a)
    y = tl.abs(b)
    m = tl.where(x > y, x, y)
    n = tl.where(x > y, y, x)
    q = n / tl.where(m == 0, m + 1.0, m)
    r = tl.where(m == 0, m, m * tl.sqrt(1.0 + q * q))
    r = tl.where((x != x) | (y != y), a + b, r)
    return tl.where((x == _INF) | (y == _INF), _zeros_like(r) + _INF, r)
''',
    "_np_logaddexp": '''
@triton.jit
def _np_logaddexp(a, b):
    # max + log1p(exp(-|a - b|)); a + log(2) where a == b (infinities of one
    # sign), NaN where a - b is NaN
    tmp = a - b
    pos = tmp > 0
    big = tl.where(pos, a, b)
    r = big + libdevice.log1p(libdevice.exp(tl.where(pos, -tmp, tmp)))
    r = tl.where(tmp != tmp, tmp, r)
    return tl.where(a == b, a + 0.6931471805599453, r)
''',
    "_np_heaviside": '''
@triton.jit
def _np_heaviside(a, b):
    z = _zeros_like(a)
    r = tl.where(a < 0, z, z + 1)
    r = tl.where(a == 0, b, r)
    return tl.where(a != a, a, r)
''',
    "_np_ldexp": '''
@triton.jit
def _np_ldexp(x, n):
    # n clamped where every x saturates, so that it fits libdevice's int32
    n = tl.where(n > 3000, 3000, tl.where(n < -3000, -3000, n))
    return libdevice.ldexp(x, n.to(tl.int32))
''',
    # reductions' combine functions (tl.reduce)
    "_combine_sum": '''
@triton.jit
def _combine_sum(a, b):
    return a + b
''',
    "_combine_prod": '''
@triton.jit
def _combine_prod(a, b):
    return a * b
''',
    "_combine_argmax": '''
@triton.jit
def _combine_argmax(va, ia, vb, ib):
    # the first position of the largest value, a NaN winning over any number
    a_nan = va != va
    b_nan = vb != vb
    first = ia < ib
    better = (va > vb) | ((va == vb) & first)
    pick_a = (a_nan & ((b_nan == 0) | first)) | ((a_nan == 0) & (b_nan == 0) & better)
    return tl.where(pick_a, va, vb), tl.where(pick_a, ia, ib)
''',
    "_combine_argmin": '''
@triton.jit
def _combine_argmin(va, ia, vb, ib):
    a_nan = va != va
    b_nan = vb != vb
    first = ia < ib
    better = (va < vb) | ((va == vb) & first)
    pick_a = (a_nan & ((b_nan == 0) | first)) | ((a_nan == 0) & (b_nan == 0) & better)
    return tl.where(pick_a, va, vb), tl.where(pick_a, ia, ib)
''',
}
# helpers generated per float type (their text holds _DIV/_SQRT)
PER_FLOAT = ("_np_floordiv_f",)

PRELUDE = '''import triton
import triton.language as tl
from triton.language.extra import libdevice

_NAN = tl.constexpr(float("nan"))
_INF = tl.constexpr(float("inf"))
'''


def helpers_called(text: str) -> list[str]:
    """The helpers text calls, and the ones they call, each once, callees first."""
    out: list[str] = []
    seen: set[str] = set()

    def visit(t: str) -> None:
        for name in re.findall(r"\b(_(?:np|combine|zeros)\w*)\b", t):
            if name not in seen and (name in HELPERS or name.rsplit("_", 1)[0] in PER_FLOAT):
                seen.add(name)
                visit(helper_source(name))
                out.append(name)
    visit(text)
    return out


def helper_source(name: str) -> str:
    """The source of a helper by its generated name (`_np_floordiv_f_f64`:
    `_np_floordiv_f` for float64)."""
    for base in PER_FLOAT:
        if name.startswith(base + "_"):
            kind = name[len(base) + 1:]
            div = "tl.div_rn(" if kind == "f32" else "_div_ieee64("
            text = HELPERS[base].replace(f"def {base}(", f"def {name}(").replace("_DIV(", div)
            if kind == "f64":
                text = '''
@triton.jit
def _div_ieee64(a, b):
    return a / b
''' + text
            return text
    return HELPERS[name]


# ---- the rules -------------------------------------------------------------------
# a ufunc rule is (handler, args, input types, result type) -> text; args are
# variable names (or short expressions) of the operands

def _arith(op: str) -> UfuncRule:
    """add, subtract, multiply; on bools add is `or`, multiply `and`."""
    def rule(h, args, types, rt):
        a, b = h.as_type(args, types, rt)
        if is_bool(types[0]):
            return f"({a} | {b})" if op == "+" else f"({a} & {b})"
        return f"({a} {op} {b})"
    return rule


def _divide(h, args, types, rt):
    a, b = h.as_type(args, types, rt)
    return h.ieee("div", rt, a, b)


def _reciprocal(h, args, types, rt):
    (a,) = h.as_type(args, types, rt)
    return h.ieee("div", rt, f"(_zeros_like({a}) + 1)", a)


def _negative(h, args, types, rt):
    return _neg(args[0], rt) if is_float(rt) else f"(-{args[0]})"


# the sign bit of each float type, as the signed integer of its width
_SIGN_BIT = {16: ("tl.int16", -(1 << 15)), 32: ("tl.int32", -(1 << 31)),
             64: ("tl.int64", -(1 << 63))}


def _neg(a: str, rt) -> str:
    """-a for a float: its sign bit flipped (IEEE negate, -0.0 included)."""
    ity, bit = _SIGN_BIT[rt.bitwidth]
    return f"({a}.to({ity}, bitcast=True) ^ {bit}).to({tl_dtype(rt)}, bitcast=True)"


def _absolute(h, args, types, rt):
    a, t = args[0], types[0]
    if is_float(t):
        return f"tl.abs({a})"
    if is_unsigned(t) or is_bool(t):
        return a
    return f"tl.where({a} < 0, -{a}, {a})"  # INT_MIN stays INT_MIN, as in numpy


def _square(h, args, types, rt):
    return f"({args[0]} * {args[0]})"


def _sign(h, args, types, rt):
    a, t = args[0], types[0]
    if is_bool(t):
        return a
    if is_unsigned(t):
        return f"tl.where({a} != 0, _zeros_like({a}) + 1, _zeros_like({a}))"
    return h.call("_np_sign", [a], rt)


def _extreme(name: str) -> UfuncRule:
    """maximum, minimum (NaN wins), fmax, fmin (NaN ignored); integers and
    bools compare as their type (a NaN test on them is false)."""
    def rule(h, args, types, rt):
        if is_bool(types[0]):
            op = "|" if name in ("_np_max", "_np_fmax") else "&"
            return f"({args[0]} {op} {args[1]})"
        if not is_float(types[0]) and name in ("_np_fmax", "_np_fmin"):
            name_ = "_np_max" if name == "_np_fmax" else "_np_min"
            return h.call(name_, args, rt)
        return h.call(name, args, rt)
    return rule


def _divmod(fn: str) -> UfuncRule:
    """floor_divide, remainder, fmod."""
    def rule(h, args, types, rt):
        t = types[0]
        if is_float(t):
            a, b = h.as_type(args, types, rt)
            if fn == "fmod":
                return h.float_fn(lambda x, y: f"libdevice.fmod({x}, {y})", [a, b], rt)
            if fn == "remainder":
                return h.call("_np_remainder_f", [a, b], rt)
            return h.call(f"_np_floordiv_f_{'f64' if isinstance(rt, Float64Type) else 'f32'}",
                          [a, b], rt)
        if is_unsigned(t) or is_bool(t):
            name = {"floor_divide": "_np_floordiv_uint", "remainder": "_np_remainder_uint",
                    "fmod": "_np_remainder_uint"}[fn]
        else:
            name = {"floor_divide": "_np_floordiv_int", "remainder": "_np_remainder_int",
                    "fmod": "_np_fmod_int"}[fn]
        return f"{name}({args[0]}, {args[1]}).to({h.dtype(rt)})"
    return rule


def _rounding(name: str) -> UfuncRule:
    """floor, ceil, trunc, rint: integer loops give the value itself."""
    def rule(h, args, types, rt):
        if not is_float(types[0]):
            return args[0]
        return h.float_fn(lambda x: _ROUNDING[name].format(x), args, rt)
    return rule


_ROUNDING = {"floor": "tl.floor({})", "ceil": "tl.ceil({})", "trunc": "libdevice.trunc({})",
             "rint": "libdevice.rint({})"}


def _float_class(fn: str) -> UfuncRule:
    """isnan, isinf, isfinite, signbit (of an integer: its sign, or a constant)."""
    def rule(h, args, types, rt):
        a, t = args[0], types[0]
        if not is_float(t):
            if fn == "signbit" and not (is_unsigned(t) or is_bool(t)):
                return f"({a} < 0)"
            return f"(_zeros_like({a}) {'==' if fn == 'isfinite' else '!='} 0)"
        if fn == "isnan":
            return f"({a} != {a})"
        if fn == "isinf":
            return f"(({a} == _INF) | ({a} == -_INF))"
        if fn == "isfinite":
            return f"(tl.abs({a}) < _INF)"
        return f"({a}.to({int_dtype(width(t))}, bitcast=True) < 0)"
    return rule


def _truth(a: str, t: Attribute) -> str:
    """A value's truth as int1: nonzero (NaN is true: `!=` is unordered)."""
    return a if is_bool(t) else f"({a} != 0)"


def _logical(op: str | None) -> UfuncRule:
    """logical_and/or/xor (`op` the operator); logical_not for None."""
    def rule(h, args, types, rt):
        xs = [_truth(a, t) for a, t in zip(args, types)]
        if op is None:
            return f"(~{xs[0]})"
        return f"({xs[0]} {op} {xs[1]})"
    return rule


def _bitwise(op: str) -> UfuncRule:
    return lambda h, args, types, rt: f"({args[0]} {op} {args[1]})"


def _invert(h, args, types, rt):
    return f"(~{args[0]})"


def _shift(left: bool) -> UfuncRule:
    """left_shift, right_shift: a count past the width (or negative, a huge
    unsigned) shifts every bit out: 0, or the sign's fill for an arithmetic
    right shift."""
    def rule(h, args, types, rt):
        a, b = args
        w = width(types[0])
        inr = h.let(f"({b}.to({int_dtype(w, True)}, bitcast=True) < {w})")
        safe = h.let(f"tl.where({inr}, {b}, 0)")
        if left:
            return f"tl.where({inr}, {a} << {safe}, 0)"
        if is_unsigned(types[0]):
            return f"tl.where({inr}, {a} >> {safe}, 0)"
        return f"tl.where({inr}, {a} >> {safe}, {a} >> {w - 1})"
    return rule


def _libdevice(fname: str) -> UfuncRule:
    """A float function of libdevice (float16 computes in float32)."""
    def rule(h, args, types, rt):
        xs = h.as_type(args, types, rt)
        return h.float_fn(lambda *x: f"libdevice.{fname}({', '.join(x)})", xs, rt)
    return rule


def _hypot(h, args, types, rt):
    if isinstance(rt, Float64Type):
        return h.call("_np_hypot_f64", h.as_type(args, types, rt), rt)
    return _libdevice("hypot")(h, args, types, rt)


def _sqrt(h, args, types, rt):
    (a,) = h.as_type(args, types, rt)
    return h.ieee("sqrt", rt, a)


def _helper_rule(name: str) -> UfuncRule:
    def rule(h, args, types, rt):
        return h.call(name, h.as_type(args, types, rt), rt)
    return rule


def _scale(to_degrees: bool) -> UfuncRule:
    """deg2rad/radians, rad2deg/degrees: one multiply by numpy's constant,
    which its float32 (and float16) loops compute in float32: 180f / pi_f is
    57.295776, not float32(180 / pi) = 57.29578."""
    def rule(h, args, types, rt):
        xs = h.as_type(args, types, rt)
        ft = np.float64 if isinstance(rt, Float64Type) else np.float32
        pi, half = ft(np.pi), ft(180.0)
        factor = float(half / pi if to_degrees else pi / half)
        return h.float_fn(lambda x: f"({x} * {factor!r})", xs, rt)
    return rule


def _ldexp(h, args, types, rt):
    x = args[0] if is_float(types[0]) else f"{args[0]}.to({h.dtype(rt)})"
    return h.float_fn(lambda a: f"_np_ldexp({a}, {args[1]})", [x], rt)


# numpy name -> libdevice name
_LIBDEVICE = {"cbrt": "cbrt", "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log",
              "log2": "log2", "log10": "log10", "log1p": "log1p", "sin": "sin", "cos": "cos",
              "tan": "tan", "arcsin": "asin", "arccos": "acos", "arctan": "atan",
              "arctan2": "atan2", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
              "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "power": "pow",
              "copysign": "copysign"}

UFUNC_RULES: dict[str, UfuncRule] = {
    "add": _arith("+"), "subtract": _arith("-"), "multiply": _arith("*"),
    "divide": _divide, "reciprocal": _reciprocal,
    "floor_divide": _divmod("floor_divide"), "remainder": _divmod("remainder"),
    "fmod": _divmod("fmod"),
    "negative": _negative, "absolute": _absolute, "square": _square, "sign": _sign,
    "sqrt": _sqrt,
    "maximum": _extreme("_np_max"), "minimum": _extreme("_np_min"),
    "fmax": _extreme("_np_fmax"), "fmin": _extreme("_np_fmin"),
    "floor": _rounding("floor"), "ceil": _rounding("ceil"), "trunc": _rounding("trunc"),
    "rint": _rounding("rint"),
    "isnan": _float_class("isnan"), "isinf": _float_class("isinf"),
    "isfinite": _float_class("isfinite"), "signbit": _float_class("signbit"),
    "logical_and": _logical("&"), "logical_or": _logical("|"), "logical_xor": _logical("^"),
    "logical_not": _logical(None),
    "bitwise_and": _bitwise("&"), "bitwise_or": _bitwise("|"), "bitwise_xor": _bitwise("^"),
    "invert": _invert, "left_shift": _shift(True), "right_shift": _shift(False),
    "logaddexp": _helper_rule("_np_logaddexp"), "heaviside": _helper_rule("_np_heaviside"),
    "ldexp": _ldexp, "hypot": _hypot,
    "deg2rad": _scale(False), "radians": _scale(False),
    "rad2deg": _scale(True), "degrees": _scale(True),
    **{name: _libdevice(f) for name, f in _LIBDEVICE.items()},
}


# ---- upstream arith/math ops: (handler, args, result type) -> text ---------------

def _binary(op: str) -> UpstreamRule:
    return lambda h, args, rt: f"({args[0]} {op} {args[1]})"


def _as_ufunc(name: str) -> UpstreamRule:
    """A math op: the rule of the ufunc it computes, on operands of its type."""
    rule = UFUNC_RULES[name]
    return lambda h, args, rt: rule(h, args, [rt] * len(args), rt)


UPSTREAM_RULES: dict[str, UpstreamRule] = {
    "arith.addf": _binary("+"), "arith.subf": _binary("-"), "arith.mulf": _binary("*"),
    "arith.divf": lambda h, args, rt: h.ieee("div", rt, *args),
    "arith.negf": lambda h, args, rt: _neg(args[0], rt),
    "arith.addi": _binary("+"), "arith.subi": _binary("-"), "arith.muli": _binary("*"),
    "arith.andi": _binary("&"), "arith.ori": _binary("|"), "arith.xori": _binary("^"),
    "arith.maxsi": lambda h, args, rt: f"tl.maximum({args[0]}, {args[1]})",
    "arith.minsi": lambda h, args, rt: f"tl.minimum({args[0]}, {args[1]})",
    "math.fma": lambda h, args, rt: h.float_fn(lambda a, b, c: f"tl.fma({a}, {b}, {c})",
                                               list(args), rt),
    **{op: _as_ufunc(name) for op, name in U.UPSTREAM.items() if op.startswith("math.")},
}


# ---- affine index expressions --------------------------------------------------

def nonneg(e: AffineExpr) -> bool:
    """e is >= 0 wherever its dims and symbols are (indices and offsets are):
    C's `//` and `%` are then floor division and modulo."""
    if isinstance(e, (AffineDimExpr, AffineSymExpr)):
        return True
    if isinstance(e, AffineConstantExpr):
        return e.value >= 0
    assert isinstance(e, AffineBinaryOpExpr)
    return nonneg(e.lhs) and nonneg(e.rhs)


def affine_text(e: AffineExpr, dims: list[str], syms: list[str]) -> str:
    """An affine expression as integer arithmetic on the index variables."""
    if isinstance(e, AffineDimExpr):
        return dims[e.position]
    if isinstance(e, AffineSymExpr):
        return syms[e.position]
    if isinstance(e, AffineConstantExpr):
        return str(e.value)
    assert isinstance(e, AffineBinaryOpExpr)
    a, b = affine_text(e.lhs, dims, syms), affine_text(e.rhs, dims, syms)
    k = e.kind
    if k == AffineBinaryOpKind.Add:
        if b.startswith("-"):
            return f"({a} - {b[1:]})"
        return f"({a} + {b})"
    if k == AffineBinaryOpKind.Mul:
        if b == "1":
            return a
        return f"({a} * {b})"
    exact = nonneg(e.lhs) and isinstance(e.rhs, AffineConstantExpr) and e.rhs.value > 0
    if k == AffineBinaryOpKind.Mod:
        return f"({a} % {b})" if exact else f"(({a} % {b} + {b}) % {b})"
    if k == AffineBinaryOpKind.FloorDiv:
        return f"({a} // {b})" if exact else \
            f"tl.where(({a} % {b} != 0) & (({a} < 0) != ({b} < 0)), {a} // {b} - 1, {a} // {b})"
    if k == AffineBinaryOpKind.CeilDiv:
        return f"(({a} + {b} - 1) // {b})" if exact else \
            f"tl.where(({a} % {b} != 0) & (({a} < 0) == ({b} < 0)), {a} // {b} + 1, {a} // {b})"
    raise NotImplementedError(f"triton: no rule for the affine expression {e}")


# ---- the handler -------------------------------------------------------------------

_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_UNORDERED_NOT = {"ult": ">=", "ule": ">", "ugt": "<=", "uge": "<"}


# float16 maximum/minimum/fmax/fmin: (comparison, the operand whose NaN picks a)
_HALF_EXTREMES = {"maximum": (">=", 0), "minimum": ("<=", 0), "fmax": (">=", 1),
                  "fmin": ("<=", 1)}


class TritonOps(ScalarOps[str]):
    """The scalar ops of one kernel's body as Triton text, for the kernel
    emitter `em` (which owns the variables, their types and the helpers)."""

    backend = "triton"
    UFUNCS = UFUNC_RULES
    UPSTREAM = UPSTREAM_RULES

    def __init__(self, em: Any):  # a triton_kernel.KernelEmitter
        self.em = em

    # ---- what rules use ----
    def let(self, expr: str) -> str:
        return self.em.let(expr)

    def dtype(self, t: Attribute) -> str:
        return tl_dtype(t, self.em.index_bits)

    def call(self, helper: str, args, rt: Attribute) -> str:
        """A helper on the operands (float16 ones in float32)."""
        return self.float_fn(lambda *x: f"{helper}({', '.join(x)})", list(args), rt) \
            if is_float(rt) else f"{helper}({', '.join(args)})"

    def as_type(self, args, types, rt) -> list[str]:
        """Operands cast to the result's float type where they are not floats
        (numpy's loops for a float result)."""
        if not is_float(rt):
            return list(args)
        return [a if is_float(t) else f"{a}.to({self.dtype(rt)})" for a, t in zip(args, types)]

    def float_fn(self, make, args, rt) -> str:
        """make(*args) on float operands; float16 (and bfloat16) in float32,
        rounded once to the result type, as numpy's float16 loops do."""
        if isinstance(rt, (Float16Type, BFloat16Type)):
            return f"{make(*[f'{a}.to(tl.float32)' for a in args])}.to({self.dtype(rt)})"
        return make(*args)

    def ieee(self, op: str, rt: Attribute, *args: str) -> str:
        """IEEE-rounded division or square root of type rt."""
        if isinstance(rt, Float64Type):
            return f"({args[0]} / {args[1]})" if op == "div" else f"tl.sqrt({args[0]})"
        fn = "tl.div_rn" if op == "div" else "tl.sqrt_rn"
        return self.float_fn(lambda *x: f"{fn}({', '.join(x)})", list(args), rt)

    # ---- float16 and bfloat16: in float32, rounded once to the result type ----
    # (numpy's float16 loops and ml_dtypes' bfloat16 ones compute so; Triton's
    # interpreter has no arithmetic, comparison or integer conversion of
    # bfloat16 values at all: it holds them as their bits)
    def widen(self, x: str, t: Attribute | None) -> str:
        """x in float32 where it is a float16/bfloat16 value (exact)."""
        return self.let(f"{x}.to(tl.float32)") if is_half(t) else x

    def ufunc(self, fn, args, in_types, rt):
        if not (is_half(rt) or any(is_half(t) for t in in_types)):
            return super().ufunc(fn, args, in_types, rt)
        f32 = Float32Type()
        xs = [self.widen(a, t) for a, t in zip(args, in_types)]
        r = super().ufunc(fn, xs, [f32 if is_half(t) else t for t in in_types],
                          f32 if is_half(rt) else rt)
        if fn == "sign" and isinstance(rt, BFloat16Type):  # (ml_dtypes': a zero keeps its sign)
            r = f"tl.where({xs[0]} == 0, {xs[0]}, {r})"
        if fn in _HALF_EXTREMES and isinstance(rt, Float16Type):
            # numpy's float16 loops: of equal values (0.0 and -0.0) the first
            op, nan = _HALF_EXTREMES[fn]
            a, b = xs
            r = f"tl.where(({a} {op} {b}) | ({xs[nan]} != {xs[nan]}), {a}, {b})"
        return f"{r}.to({self.dtype(rt)})" if is_half(rt) else r

    def upstream(self, name, args, rt):
        if not is_half(rt):
            return super().upstream(name, args, rt)
        xs = [self.widen(a, self.em.type_of(a)) for a in args]
        return f"{super().upstream(name, xs, Float32Type())}.to({self.dtype(rt)})"

    def to_half(self, x: str, src: Attribute, dst: Attribute) -> str:
        """numpy's (ml_dtypes') cast to float16/bfloat16: one rounding of the
        exact value (float32 and narrower: Triton's round-to-nearest-even
        conversion; float64, and integers through float64 as ml_dtypes
        converts them: rounded to odd in float32 first, which keeps the one
        rounding to the narrower type exact)."""
        if isinstance(src, Float32Type):
            return f"{x}.to({self.dtype(dst)})"
        if is_half(src) or is_bool(src):
            return f"{x}.to(tl.float32).to({self.dtype(dst)})"
        if not isinstance(src, Float64Type):
            x = self.let(f"{x}.to(tl.float64)")
        t = self.let(f"{x}.to(tl.float32)")  # (nearest: one step from x's truncation)
        bits = self.let(f"{t}.to(tl.int32, bitcast=True)")
        tz = self.let(f"tl.where(tl.abs({t}.to(tl.float64)) > tl.abs({x}), {bits} - 1, {bits})")
        odd = self.let(f"tl.where({tz}.to(tl.float32, bitcast=True).to(tl.float64) != {x}, "
                       f"{tz} | 1, {tz})")
        return f"{odd}.to(tl.float32, bitcast=True).to({self.dtype(dst)})"

    # ---- the protocol ----
    def constant(self, text, rt):
        if isinstance(rt, IndexType):
            return str(int(text))
        if text in ("true", "false"):
            v: float | int = int(text == "true")
        else:
            v = np.array(float(text) if is_float(rt) else int(text)).astype(from_ir(rt)).item()
        return f"tl.full([], {literal(v, rt)}, {self.dtype(rt)})"

    def cast(self, x, src, dst):
        if src == dst:
            return x
        if isinstance(dst, IndexType) or isinstance(src, IndexType):
            return f"{x}.to({self.dtype(dst)})"
        if is_half(dst):
            return self.to_half(x, src, dst)
        if isinstance(src, BFloat16Type) and isinstance(dst, IntegerType) and not is_bool(dst):
            return self.bfloat16_to_int(self.widen(x, src), dst)
        if is_half(src):
            x, src = self.widen(x, src), Float32Type()
            if isinstance(dst, Float32Type):
                return x
        if is_bool(dst):
            return f"({x} != 0)"
        if is_float(src) and not is_float(dst):
            return self.float_to_int(x, src, dst)
        return f"{x}.to({self.dtype(dst)})"

    def bfloat16_to_int(self, x: str, dst: Attribute) -> str:
        """ml_dtypes' cast of bfloat16 (here in float32) to an integer type:
        the value truncated toward zero where that lies in the type's range,
        else 0 (NaN and the infinities too), unlike numpy's float loops."""
        w = width(dst)
        lo, hi = (0.0, float(2 ** w)) if is_unsigned(dst) else \
            (-float(2 ** (w - 1)), float(2 ** (w - 1)))
        t = self.let(f"libdevice.trunc({x})")
        ok = self.let(f"({t} >= {lo!r}) & ({t} < {hi!r})")
        return f"tl.where({ok}, tl.where({ok}, {t}, 0.0).to({self.dtype(dst)}), 0)"

    def float_to_int(self, x: str, src: Attribute, dst: Attribute) -> str:
        """numpy's casts on x86 (cvtt): NaN and out-of-range give the
        "integer indefinite" INT_MIN of the 32- or 64-bit conversion, and
        narrower types truncate the 32-bit result; uint32 converts through
        int64, as numpy's loops do, so that [2**31, 2**32) converts exactly.
        (numpy's own results for NaN and out-of-range values into uint32
        and uint64 depend on which of its loops runs: C leaves them
        undefined, numpy warns "invalid value encountered in cast".)"""
        if isinstance(src, (Float16Type, BFloat16Type)):
            x = self.let(f"{x}.to(tl.float32)")
        w = width(dst)
        cw = 64 if w == 64 or (w == 32 and is_unsigned(dst)) else 32
        lim = float(2 ** (cw - 1))
        lo = f"({x} > {-lim - 1.0!r})" if cw == 32 else f"({x} >= {-lim!r})"
        ok = self.let(f"{lo} & ({x} < {lim!r})")
        imin = f"tl.full([], {-(1 << (cw - 1))}, tl.int{cw})"
        v = self.let(f"tl.where({ok}, tl.where({ok}, {x}, 0).to(tl.int{cw}), {imin})")
        if cw == 64 and is_unsigned(dst):
            big = self.let(f"({x} >= {lim!r}) & ({x} < {2 * lim!r})")
            return (f"tl.where({big}, tl.where({big}, {x}, 0).to(tl.uint64), "
                    f"{v}.to(tl.uint64, bitcast=True))")
        if w == cw:
            return f"{v}.to({self.dtype(dst)}, bitcast=True)" if is_unsigned(dst) else v
        return f"{v}.to({self.dtype(dst)})"  # truncation

    def cmpf(self, predicate, a, b):
        a, b = (self.widen(x, self.em.type_of(x)) for x in (a, b))
        if predicate == "false":
            return f"(({a} != {a}) & ({a} == {a}))"
        if predicate == "true":
            return f"(({a} != {a}) | ({a} == {a}))"
        if predicate == "ord":
            return f"(({a} == {a}) & ({b} == {b}))"
        if predicate == "uno":
            return f"(({a} != {a}) | ({b} != {b}))"
        if predicate == "one":
            return f"(({a} < {b}) | ({a} > {b}))"
        if predicate == "ueq":
            return f"(~(({a} < {b}) | ({a} > {b})))"
        if predicate == "une":
            return f"({a} != {b})"
        if predicate in _UNORDERED_NOT:
            return f"(~({a} {_UNORDERED_NOT[predicate]} {b}))"
        return f"({a} {_CMP[predicate[1:]]} {b})"  # Triton's float compares are ordered

    def cmpi(self, predicate, a, b):
        if predicate in ("eq", "ne"):
            return f"({a} {_CMP[predicate]} {b})"
        t = self.em.type_of(a)
        w = self.em.index_bits if isinstance(t, IndexType) else width(t)
        want_unsigned = predicate[0] == "u"
        if w > 1 and want_unsigned != (t is not None and is_unsigned(t)):
            # the predicate's signedness, not the type's: the same bits reinterpreted
            a, b = (f"{x}.to({int_dtype(w, want_unsigned)}, bitcast=True)" for x in (a, b))
        return f"({a} {_CMP[predicate[1:]]} {b})"

    def select(self, cond, a, b):
        return f"tl.where({cond}, {a}, {b})"

    def index_cast(self, op, args):
        return f"{args[0]}.to({self.dtype(op.result.type)})"

    def affine_apply(self, op, args):
        m = op.map.data
        return affine_text(m.results[0], list(args[:m.num_dims]), list(args[m.num_dims:]))


def reduce_neutral(kind: str, t: Attribute) -> str:
    """The value a masked lane contributes to a reduction of `kind` over type t."""
    if kind in ("sum", "any"):
        return literal(0, t)
    if kind in ("prod", "all"):
        return literal(1, t)
    big = kind in ("min", "argmin")
    if is_float(t):
        return "_INF" if big else "-_INF"
    if is_bool(t):
        return "1" if big else "0"
    info = np.iinfo(np.dtype(f"{'u' if is_unsigned(t) else ''}int{width(t)}"))
    return str(info.max if big else info.min)
