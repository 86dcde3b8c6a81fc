"""The ops handler for LLVM (`LLVMOps`, an implementation of
`lowering/codegen/ops.py`'s protocol): numpy's meaning of every scalar op of
a kernel body, built as llvmlite IR values, scalars or vectors of `w` lanes.

The rules are tables keyed by op: `UFUNC_RULES` by numpy name (`loop.ufunc`),
`UPSTREAM_RULES` by upstream op name; the float functions they share go
through `float_math` (vector intrinsics, `llvm_math`'s polynomials, or libm
per lane)."""

from __future__ import annotations

import math

import llvmlite.ir as ir
import numpy as np

from dialects import ufuncs as U

from .llvm_types import (
    FM,
    I1,
    I32,
    X86,
    const,
    is_float,
    is_unsigned,
    llvm_math,
    llvm_type,
    np_extreme,
    parse_const,
    vec,
)
from .ops import ScalarOps, UfuncRule, UpstreamRule

# llvm intrinsics that stay vector instructions
_VECTOR_INTRINSICS = {"sqrt": "sqrt", "fabs": "fabs", "absolute": "fabs", "floor": "floor",
                      "ceil": "ceil", "trunc": "trunc", "rint": "roundeven",
                      "copysign": "copysign"}
# numpy name -> C libm name, for the per-lane fallback
_LIBM = {"exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log2": "log2",
         "log10": "log10", "log1p": "log1p", "sin": "sin", "cos": "cos", "tan": "tan",
         "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh", "cosh": "cosh",
         "tanh": "tanh", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh",
         "cbrt": "cbrt", "power": "pow", "arctan2": "atan2", "hypot": "hypot", "fmod": "fmod"}
# upstream math op -> numpy name: the op table's rewrites (dialects/ufuncs.py)
MATH_UFUNC = {op: name for op, name in U.UPSTREAM.items() if op.startswith("math.")}


def float_math(h: LLVMOps, name: str, args, ty: ir.Type):
    """A float function of numpy's name on scalars or vectors."""
    b, w = h.b, h.w
    if name in _VECTOR_INTRINSICS:
        return b.call(h.em.intrinsic(_VECTOR_INTRINSICS[name], ty, len(args)), args)
    el = ty.element if isinstance(ty, ir.VectorType) else ty
    if isinstance(el, ir.HalfType):  # numpy computes float16 functions in float32
        ft = vec(ir.FloatType(), w)
        r = float_math(h, name, [b.fpext(a, ft) for a in args], ft)
        return b.fptrunc(r, ty)
    dt = {"float": "f32", "double": "f64"}.get(str(el))
    if (llvm_math is not None and dt is not None and hasattr(llvm_math, "math_function")
            and name in llvm_math.SUPPORTED):
        f = llvm_math.math_function(h.em.module, name, dt, w)
        return b.call(f, args)
    sym = _LIBM[name]
    f = h.em.libm(sym, el, len(args))
    if w == 1:
        return b.call(f, args)
    out = ir.Constant(ty, ir.Undefined)
    for lane in range(w):
        x = [b.extract_element(a, const(I32, lane)) for a in args]
        out = b.insert_element(out, b.call(f, x), const(I32, lane))
    return out


def _float_function(name: str):
    """The rule of a ufunc or math op that is `float_math`'s function `name`."""
    return lambda h, args, *_: float_math(h, name, list(args), args[0].type)


def isnan(b, x):
    return b.fcmp_unordered("uno", x, x)


def fzero(ty):
    return ir.Constant(ty, None) if not isinstance(ty, ir.VectorType) else ir.Constant(
        ty, [ir.Constant(ty.element, 0.0)] * ty.count)


def fconst(ty, v):
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [ir.Constant(ty.element, v)] * ty.count)
    return ir.Constant(ty, v)


def iconst(ty, v):
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [ir.Constant(ty.element, v)] * ty.count)
    return ir.Constant(ty, v)


def i1_like(ty):
    return ir.VectorType(I1, ty.count) if isinstance(ty, ir.VectorType) else I1


def _element_width(t) -> int:
    return (t.element if isinstance(t, ir.VectorType) else t).width


# ---- loop.cast ------------------------------------------------------------------

def cast(h: LLVMOps, x, src, dst):
    """numpy's astype (unsafe) on x86."""
    b, w = h.b, h.w
    st, dt = llvm_type(src), llvm_type(dst)
    sty, dty = vec(st, w), vec(dt, w)
    if src == dst:
        return x
    if dt == I1:
        if is_float(src):
            return b.fcmp_unordered("!=", x, fzero(sty))  # NaN -> True
        return b.icmp_signed("!=", x, iconst(sty, 0))
    if is_float(src) and is_float(dst):
        order = {"half": 0, "float": 1, "double": 2}
        return b.fpext(x, dty) if order[str(st)] < order[str(dt)] else b.fptrunc(x, dty)
    if is_float(dst):
        return b.uitofp(x, dty) if is_unsigned(src) else b.sitofp(x, dty)
    if is_float(src):
        return _float_to_int(h, x, st, dt, dst)
    # int -> int
    if st.width == dt.width:
        return x
    if st.width > dt.width:
        return b.trunc(x, dty)
    return b.zext(x, dty) if is_unsigned(src) else b.sext(x, dty)


def _float_to_int(h: LLVMOps, x, st, dt, dst):
    """x86 cvtt: NaN and out-of-range give the "integer indefinite" INT_MIN of
    the 32/64-bit conversion; narrower types truncate the 32-bit result."""
    b, w = h.b, h.w
    if isinstance(st, ir.HalfType):  # via float32: the limits below do not fit in half
        x, st = b.fpext(x, vec(ir.FloatType(), w)), ir.FloatType()
    sty, dty = vec(st, w), vec(dt, w)
    width = dt.width
    cw = 64 if width == 64 else 32
    ct = vec(ir.IntType(cw), w)
    lim = float(2 ** (cw - 1))
    ok = b.and_(b.fcmp_ordered(">", x, fconst(sty, -lim - 1.0) if cw == 32 else fconst(sty, -lim)),
                b.fcmp_ordered("<", x, fconst(sty, lim)))
    if cw == 64 and is_unsigned(dst):
        big = b.fcmp_ordered(">=", x, fconst(sty, lim))
        ok_u = b.and_(big, b.fcmp_ordered("<", x, fconst(sty, 2.0 * lim)))
        v = b.select(ok, b.fptosi(x, ct), iconst(ct, 1 << 63))
        return b.select(ok_u, b.fptoui(x, ct), v)
    v = b.select(ok, b.fptosi(x, ct), iconst(ct, 1 << (cw - 1)))
    return v if width == cw else b.trunc(v, dty)


# ---- loop.ufunc: one rule per numpy name -----------------------------------------
# a rule is (handler, args, input types, result type) -> value; the input
# types are the loop's (numpy's dtypes of the operands, before any widening)

def _rounding(name: str) -> UfuncRule:
    """floor, ceil, trunc, rint: integer loops give the value itself."""
    def rule(h, args, types, rt):
        return float_math(h, name, list(args), args[0].type) if is_float(types[0]) else args[0]
    return rule


def _extreme(is_max: bool) -> UfuncRule:
    """maximum, minimum: a NaN wins (`np_extreme`)."""
    return lambda h, args, types, rt: np_extreme(h.cg, is_max, types[0], *args)


def _fextreme(is_max: bool) -> UfuncRule:
    """fmax, fmin: a NaN is ignored unless both are NaN."""
    def rule(h, args, types, rt):
        b, (a, y) = h.b, args
        if not is_float(types[0]):
            return np_extreme(h.cg, is_max, types[0], a, y)
        m = np_extreme(h.cg, is_max, types[0], a, y)
        return b.select(isnan(b, a), y, b.select(isnan(b, y), a, m))
    return rule


_FLOAT_ARITH = {"add": "fadd", "subtract": "fsub", "multiply": "fmul"}
_INT_ARITH = {"add": "add", "subtract": "sub", "multiply": "mul"}


def _arith(fn: str) -> UfuncRule:
    """add, subtract, multiply; on bools add is `or`, multiply `and`."""
    def rule(h, args, types, rt):
        b, (a, y), t0 = h.b, args, types[0]
        if is_float(t0):
            return getattr(b, _FLOAT_ARITH[fn])(a, y, flags=FM)
        if llvm_type(t0) == I1:
            return b.or_(a, y) if fn == "add" else b.and_(a, y)
        return getattr(b, _INT_ARITH[fn])(a, y)
    return rule


def _negative(h, args, types, rt):
    a = args[0]
    return h.b.fneg(a) if is_float(types[0]) else h.b.sub(iconst(a.type, 0), a)


def _absolute(h, args, types, rt):
    b, a = h.b, args[0]
    ty = a.type
    if is_float(types[0]):
        return float_math(h, "fabs", [a], ty)
    if is_unsigned(types[0]):
        return a
    return b.select(b.icmp_signed("<", a, iconst(ty, 0)), b.sub(iconst(ty, 0), a), a)


def _square(h, args, types, rt):
    a = args[0]
    return h.b.fmul(a, a, flags=FM) if is_float(types[0]) else h.b.mul(a, a)


def _sign(h, args, types, rt):
    """-1, 0 or 1 (NaN for NaN; 0 or 1 for unsigned and bool)."""
    b, a = h.b, args[0]
    ty = a.type
    if is_float(types[0]):
        one, zero = fconst(ty, 1.0), fzero(ty)
        r = b.select(b.fcmp_ordered(">", a, zero), one,
                     b.select(b.fcmp_ordered("<", a, zero), fconst(ty, -1.0), zero))
        return b.select(isnan(b, a), a, r)
    zero = iconst(ty, 0)
    if is_unsigned(types[0]):
        return b.zext(b.icmp_unsigned("!=", a, zero), ty) if ty != I1 else a
    pos = b.zext(b.icmp_signed(">", a, zero), ty)
    neg = b.zext(b.icmp_signed("<", a, zero), ty)
    return b.sub(pos, neg)


def _float_class(fn: str) -> UfuncRule:
    """isnan, isinf, isfinite, signbit (of an integer: its sign, or a constant)."""
    def rule(h, args, types, rt):
        b, a = h.b, args[0]
        ty = a.type
        if not is_float(types[0]):
            if fn == "signbit":
                return b.icmp_signed("<", a, iconst(ty, 0)) if not is_unsigned(types[0]) \
                    else iconst(i1_like(ty), 0)
            return iconst(i1_like(ty), 1 if fn == "isfinite" else 0)
        if fn == "isnan":
            return isnan(b, a)
        ab = float_math(h, "fabs", [a], ty)  # (for signbit too, unused: LLVM drops it)
        if fn == "signbit":
            return _float_signbit(h, a)
        return b.fcmp_ordered("==" if fn == "isinf" else "<", ab, fconst(ty, math.inf))
    return rule


def _float_signbit(h, a):
    """The sign bit of a float, as the sign of the integer of its bits."""
    b, ty = h.b, a.type
    el = ty.element if isinstance(ty, ir.VectorType) else ty
    it = vec(ir.IntType(64 if str(el) == "double" else 32 if str(el) == "float" else 16), h.w)
    return b.icmp_signed("<", b.bitcast(a, it), iconst(it, 0))


def _truth(b, v, t):
    """A value's truth as i1: nonzero (NaN is true)."""
    if llvm_type(t) == I1:
        return v
    if is_float(t):
        return b.fcmp_unordered("!=", v, fzero(v.type))
    return b.icmp_signed("!=", v, iconst(v.type, 0))


def _logical(combine: str | None) -> UfuncRule:
    """logical_and/or/xor (`combine` the builder's i1 op); logical_not for None."""
    def rule(h, args, types, rt):
        b = h.b
        xs = [_truth(b, v, t) for v, t in zip(args, types)]
        if combine is None:
            return b.xor(xs[0], iconst(xs[0].type, 1))
        return getattr(b, combine)(*xs)
    return rule


def _bitwise(op: str) -> UfuncRule:
    return lambda h, args, types, rt: getattr(h.b, op)(*args)


def _invert(h, args, types, rt):
    a = args[0]
    ty = a.type
    is_bool = ty == I1 or (isinstance(ty, ir.VectorType) and ty.element == I1)
    return h.b.xor(a, iconst(ty, 1 if is_bool else -1))


def _shift(left: bool) -> UfuncRule:
    """left_shift, right_shift: a count past the width (or negative) shifts
    every bit out: 0, or the sign's fill for an arithmetic right shift."""
    def rule(h, args, types, rt):
        b, (a, y) = h.b, args
        ty = a.type
        inrange = b.icmp_unsigned("<", y, iconst(ty, _element_width(ty)))  # negative: huge unsigned
        if left:
            return b.select(inrange, b.shl(a, b.select(inrange, y, iconst(ty, 0))), iconst(ty, 0))
        safe = b.select(inrange, y, iconst(ty, 0))
        if is_unsigned(types[0]):
            return b.select(inrange, b.lshr(a, safe), iconst(ty, 0))
        fill = b.select(b.icmp_signed("<", a, iconst(ty, 0)), iconst(ty, -1), iconst(ty, 0))
        return b.select(inrange, b.ashr(a, safe), fill)
    return rule


def _divmod(fn: str) -> UfuncRule:
    """floor_divide, remainder, fmod (`float_divmod`, `int_divmod`)."""
    def rule(h, args, types, rt):
        if is_float(types[0]):
            return float_divmod(h, fn, *args)
        return int_divmod(h, fn, *args, unsigned=is_unsigned(types[0]))
    return rule


def float_divmod(h: LLVMOps, fn: str, a, y):
    """numpy's npy_divmod on floats, from C's fmod (LLVM's frem)."""
    b, ty = h.b, a.type
    mod = b.frem(a, y)
    if fn == "fmod":
        return mod
    zero = fzero(ty)
    mod_nz = b.fcmp_unordered("!=", mod, zero)  # C truthiness: NaN is nonzero
    fix = b.and_(mod_nz, b.xor(b.fcmp_ordered("<", y, zero), b.fcmp_ordered("<", mod, zero)))
    if fn == "remainder":
        m = b.select(fix, b.fadd(mod, y), mod)
        m = b.select(mod_nz, m, float_math(h, "copysign", [zero, y], ty))
        return b.select(b.fcmp_ordered("==", y, zero), mod, m)
    div = b.fdiv(b.fsub(a, mod), y)
    div = b.select(fix, b.fsub(div, fconst(ty, 1.0)), div)
    fl = float_math(h, "floor", [div], ty)
    fl = b.select(b.fcmp_ordered(">", b.fsub(div, fl), fconst(ty, 0.5)),
                  b.fadd(fl, fconst(ty, 1.0)), fl)
    q = b.fdiv(a, y)
    r = b.select(b.fcmp_unordered("!=", div, zero), fl, float_math(h, "copysign", [zero, q], ty))
    return b.select(b.fcmp_ordered("==", y, zero), q, r)


def int_divmod(h: LLVMOps, fn: str, a, y, unsigned: bool):
    """numpy's integer loops: 0 for a zero divisor, Python's signs for //
    and %; INT_MIN // -1 is INT_MIN and INT_MIN % -1 is 0 (no trap)."""
    b, ty = h.b, a.type
    zero = iconst(ty, 0)
    ydz = b.icmp_signed("==", y, zero)
    safe_y = b.select(ydz, iconst(ty, 1), y)
    if unsigned:
        if fn == "floor_divide":
            return b.select(ydz, zero, b.udiv(a, safe_y))
        return b.select(ydz, zero, b.urem(a, safe_y))
    m1 = b.icmp_signed("==", y, iconst(ty, -1))
    safe_y = b.select(m1, iconst(ty, 1), safe_y)
    q = b.sdiv(a, safe_y)
    r = b.srem(a, safe_y)
    if fn == "fmod":
        return b.select(b.or_(ydz, m1), zero, r)
    if fn == "floor_divide":
        q = b.select(m1, b.sub(zero, a), q)
        q = b.select(b.and_(_signs_differ(b, r, y), b.not_(m1)), b.sub(q, iconst(ty, 1)), q)
        return b.select(ydz, zero, q)
    r = b.select(_signs_differ(b, r, y), b.add(r, y), r)
    return b.select(b.or_(ydz, m1), zero, r)


def _signs_differ(b, r, y):
    """A nonzero C remainder r whose sign is not the divisor y's: where C's
    truncating division and Python's floor division part."""
    zero = iconst(r.type, 0)
    return b.and_(b.icmp_signed("!=", r, zero),
                  b.xor(b.icmp_signed("<", r, zero), b.icmp_signed("<", y, zero)))


def _hypot(h, args, types, rt):
    """sqrt(x*x + y*y) without overflow: hi * sqrt(1 + (lo/hi)**2); inf wins over NaN."""
    b, (a, y) = h.b, args
    ty = a.type
    ax, ay = float_math(h, "fabs", [a], ty), float_math(h, "fabs", [y], ty)
    hi = b.select(b.fcmp_ordered(">=", ax, ay), ax, ay)
    lo = b.select(b.fcmp_ordered(">=", ax, ay), ay, ax)
    safe = b.select(b.fcmp_ordered("==", hi, fzero(ty)), fconst(ty, 1.0), hi)
    q = b.fdiv(lo, safe)
    r = b.fmul(hi, float_math(h, "sqrt", [b.fadd(fconst(ty, 1.0), b.fmul(q, q))], ty))
    inf = fconst(ty, math.inf)
    anyinf = b.or_(b.fcmp_ordered("==", ax, inf), b.fcmp_ordered("==", ay, inf))
    r = b.select(b.or_(isnan(b, a), isnan(b, y)), fconst(ty, math.nan), r)
    return b.select(anyinf, inf, r)


def _logaddexp(h, args, types, rt):
    """log(exp(a) + exp(y)) as max + log1p(exp(-|a - y|)); a + log(2) where
    a == y (infinities of one sign), NaN where a - y is NaN."""
    b, (a, y) = h.b, args
    ty = a.type
    eq = b.fcmp_ordered("==", a, y)
    tmp = b.fsub(a, y)
    pos = b.fcmp_ordered(">", tmp, fzero(ty))
    neg_abs = b.select(pos, b.fneg(tmp), tmp)  # -|tmp|
    big = b.select(pos, a, y)
    corr = float_math(h, "log1p", [float_math(h, "exp", [neg_abs], ty)], ty)
    same = b.fadd(a, fconst(ty, math.log(2.0)))
    r = b.fadd(big, corr)
    r = b.select(isnan(b, tmp), tmp, r)
    return b.select(eq, same, r)


def _scale(factor: float) -> UfuncRule:
    """deg2rad/radians, rad2deg/degrees: one multiply by the constant."""
    return lambda h, args, types, rt: h.b.fmul(args[0], fconst(args[0].type, factor))


def _heaviside(h, args, types, rt):
    """0 below zero, 1 above, y at zero, NaN for NaN."""
    b, (a, y) = h.b, args
    zero = fzero(a.type)
    r = b.select(b.fcmp_ordered("<", a, zero), zero, fconst(a.type, 1.0))
    r = b.select(b.fcmp_ordered("==", a, zero), y, r)
    return b.select(isnan(b, a), a, r)


def _ldexp(h, args, types, rt):
    return ldexp(h, *args)


def ldexp(h: LLVMOps, x, n):
    """x * 2**n rounded once, as C's scalbn (musl's steps): an n beyond the
    exponent range scales x first, by 2**emax up to twice, or by 2**(emin +
    digits) up to twice, so that a subnormal result is rounded only by the last
    multiply. The factors are selected, not the products: a step not taken
    raises no flag. n (int32 or int64) is clamped where every x saturates."""
    b, ty = h.b, x.type
    el = ty.element if isinstance(ty, ir.VectorType) else ty
    f64 = str(el) == "double"
    emax, digits, lim = (1023, 53, 3000) if f64 else (127, 24, 300)
    it = vec(ir.IntType(64 if f64 else 32), h.w)
    nt = n.type
    n = b.select(b.icmp_signed(">", n, iconst(nt, lim)), iconst(nt, lim), n)
    n = b.select(b.icmp_signed("<", n, iconst(nt, -lim)), iconst(nt, -lim), n)
    nw, iw = (_element_width(nt), _element_width(it))
    n = b.trunc(n, it) if nw > iw else b.sext(n, it) if nw < iw else n
    up, down = fconst(ty, 2.0 ** emax), fconst(ty, 2.0 ** (1 - emax + digits))
    for _ in range(2):
        big = b.icmp_signed(">", n, iconst(it, emax))
        small = b.icmp_signed("<", n, iconst(it, 1 - emax))
        x = b.fmul(x, b.select(big, up, b.select(small, down, fconst(ty, 1.0))))
        n = b.select(big, b.sub(n, iconst(it, emax)),
                     b.select(small, b.add(n, iconst(it, emax - 1 - digits)), n))
    n = b.select(b.icmp_signed(">", n, iconst(it, emax)), iconst(it, emax), n)
    n = b.select(b.icmp_signed("<", n, iconst(it, 1 - emax)), iconst(it, 1 - emax), n)
    scale = b.bitcast(b.shl(b.add(n, iconst(it, emax)), iconst(it, digits - 1)), ty)
    return b.fmul(x, scale)


# the ufuncs that are one float function of `float_math`, of their own name
_FLOAT_FUNCTIONS = ("sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
                    "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh",
                    "tanh", "arcsinh", "arccosh", "arctanh", "power", "copysign")

UFUNC_RULES: dict[str, UfuncRule] = {
    "add": _arith("add"), "subtract": _arith("subtract"), "multiply": _arith("multiply"),
    "divide": lambda h, args, types, rt: h.b.fdiv(*args, flags=FM),
    "floor_divide": _divmod("floor_divide"), "remainder": _divmod("remainder"),
    "fmod": _divmod("fmod"),
    "negative": _negative, "absolute": _absolute, "square": _square, "sign": _sign,
    "reciprocal": lambda h, args, types, rt: h.b.fdiv(fconst(args[0].type, 1.0), args[0]),
    "maximum": _extreme(True), "minimum": _extreme(False),
    "fmax": _fextreme(True), "fmin": _fextreme(False),
    "floor": _rounding("floor"), "ceil": _rounding("ceil"), "trunc": _rounding("trunc"),
    "rint": _rounding("rint"),
    "isnan": _float_class("isnan"), "isinf": _float_class("isinf"),
    "isfinite": _float_class("isfinite"), "signbit": _float_class("signbit"),
    "logical_and": _logical("and_"), "logical_or": _logical("or_"),
    "logical_xor": _logical("xor"), "logical_not": _logical(None),
    "bitwise_and": _bitwise("and_"), "bitwise_or": _bitwise("or_"),
    "bitwise_xor": _bitwise("xor"), "invert": _invert,
    "left_shift": _shift(left=True), "right_shift": _shift(left=False),
    "hypot": _hypot, "logaddexp": _logaddexp, "heaviside": _heaviside, "ldexp": _ldexp,
    "deg2rad": _scale(math.pi / 180.0), "radians": _scale(math.pi / 180.0),
    "rad2deg": _scale(180.0 / math.pi), "degrees": _scale(180.0 / math.pi),
    **{name: _float_function(name) for name in _FLOAT_FUNCTIONS},
}


# ---- upstream arith/math ops ------------------------------------------------------
# a rule is (handler, args, result type) -> value

def _instruction(name: str, **kw) -> UpstreamRule:
    """An op that is one builder instruction of the same operands."""
    return lambda h, args, rt: getattr(h.b, name)(*args, **kw)


UPSTREAM_RULES: dict[str, UpstreamRule] = {
    "arith.addf": _instruction("fadd", flags=FM), "arith.subf": _instruction("fsub", flags=FM),
    "arith.mulf": _instruction("fmul", flags=FM), "arith.divf": _instruction("fdiv", flags=FM),
    "arith.negf": _instruction("fneg"),
    "arith.addi": _instruction("add"), "arith.subi": _instruction("sub"),
    "arith.muli": _instruction("mul"), "arith.andi": _instruction("and_"),
    "arith.ori": _instruction("or_"), "arith.xori": _instruction("xor"),
    "arith.maxsi": lambda h, a, rt: h.b.select(h.b.icmp_signed(">=", *a), *a),
    "arith.minsi": lambda h, a, rt: h.b.select(h.b.icmp_signed("<=", *a), *a),
    "math.fma": lambda h, a, rt: h.b.call(h.em.intrinsic("fma", a[0].type, 3), a),
    **{op: _float_function(name) for op, name in MATH_UFUNC.items()
       if name in _LIBM or name in _VECTOR_INTRINSICS},
}


# ---- the handler -------------------------------------------------------------------
_PREDICATE_SYMBOLS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


class LLVMOps(ScalarOps[ir.Value]):
    """The scalar ops of one kernel (`cg`, a KernelCodegen: its builder and
    module) at vector width `w` (1: scalars)."""

    backend = "LLVM emitter"
    UFUNCS = UFUNC_RULES
    UPSTREAM = UPSTREAM_RULES

    def __init__(self, cg, w: int):
        self.cg, self.w = cg, w

    @property
    def b(self) -> ir.IRBuilder:
        return self.cg.b

    @property
    def em(self):
        return self.cg.em

    def constant(self, text, rt):
        return const(llvm_type(rt), parse_const(text, rt), self.w)

    def cast(self, x, src, dst):
        return cast(self, x, src, dst)

    def cmpf(self, predicate, a, y):
        if (X86 and predicate in ("oeq", "une") and not isinstance(a.type, ir.VectorType)
                and (_infinite(a) or _infinite(y))):
            return self._bits_equal(predicate == "oeq", a, y)
        if predicate == "ord":
            return self.b.fcmp_ordered("ord", a, y)
        if predicate == "uno":
            return self.b.fcmp_unordered("uno", a, y)
        compare = self.b.fcmp_ordered if predicate[0] == "o" else self.b.fcmp_unordered
        return compare(_PREDICATE_SYMBOLS[predicate[1:]], a, y)

    def _bits_equal(self, equal: bool, a, y):
        """Scalar `x == ±inf` (or `!=`) as the equality of the bits: exact,
        and quiet on a NaN. As a float compare, x86's instruction selection
        makes `x == -inf` a scalar `x <= -inf` (`x == inf`: `x >= inf`),
        which raises invalid on a NaN where numpy's loop raises nothing
        (`x ** 1.5` of a NaN, in a kernel's scalar tail). The bits pass an
        empty asm: otherwise LLVM folds the integer compare back into the
        float one. (Vector compares stay quiet `vcmpeqpd`.)"""
        width = {ir.DoubleType: 64, ir.FloatType: 32, ir.HalfType: 16}[type(a.type)]
        it = ir.IntType(width)
        opaque = ir.InlineAsm(ir.FunctionType(it, [it]), "", "=r,0")
        bits = [ir.Constant(it, int(np.array(v.constant, f"f{width // 8}").view(f"u{width // 8}")))
                if _infinite(v) else self.b.call(opaque, [self.b.bitcast(v, it)]) for v in (a, y)]
        return self.b.icmp_unsigned("==" if equal else "!=", *bits)

    def cmpi(self, predicate, a, y):
        if predicate in ("eq", "ne"):
            return self.b.icmp_signed(_PREDICATE_SYMBOLS[predicate], a, y)
        compare = self.b.icmp_signed if predicate[0] == "s" else self.b.icmp_unsigned
        return compare(_PREDICATE_SYMBOLS[predicate[1:]], a, y)

    def select(self, cond, a, y):
        fence = self.cg.em.intrinsic
        arms = []
        for v in (a, y):
            kept = _computed(self.b, fence, v)
            if kept is not v and _uniform(cond):
                # and computed where the select keeps the other value: used
                # by an empty asm LLVM cannot drop (`keep_flags`), where one
                # condition holds for every lane (a scalar's, a splat's): a
                # condition LLVM resolves (a loop-invariant one it unswitches
                # on, a constant) drops the value, and x86's code preparation
                # turns a scalar select of a division into a branch around it
                # — `np.where(x > 0, 1.0 / x, 0.0)` with the zero in a
                # kernel's scalar tail raised nothing where numpy warns
                self.cg.keep_flags(v)
            arms.append(kept)
        return self.b.select(cond, *arms)

    def index_cast(self, op, args):
        return self.cg.index_as_data(op.input, self.w)

    def affine_apply(self, op, args):
        return self.cg.index_as_data(op.result, self.w)


def _uniform(v: ir.Value, depth: int = 8) -> bool:
    """v holds one value for every lane: a scalar, a constant, a splat, or
    an op of such values (as far as `depth` looks; deeper: assumed so)."""
    if not isinstance(v.type, ir.VectorType) or isinstance(v, ir.Constant) or depth == 0:
        return True
    if isinstance(v, ir.instructions.ShuffleVector):
        mask = v.operands[2].constant
        return all(m == mask[0] for m in mask) or all(
            _uniform(o, depth - 1) for o in v.operands[:2] if isinstance(o.type, ir.VectorType))
    if isinstance(v, ir.instructions.InsertElement):
        return False
    if isinstance(v, ir.Instruction):
        return all(_uniform(o, depth - 1) for o in v.operands)
    return False


def _infinite(v: ir.Value) -> bool:
    """v is a scalar constant +inf or -inf."""
    return isinstance(v, ir.Constant) and isinstance(v.constant, float) and math.isinf(v.constant)


_FLOAT_OPS = frozenset({"fadd", "fsub", "fmul", "fdiv", "frem", "fneg", "call", "fptrunc",
                        "fpext", "sitofp", "uitofp"})


def _computed(b: ir.IRBuilder, intrinsic, v: ir.Value) -> ir.Value:
    """A float operand of `np.where` computed in every lane, whichever lane
    the condition keeps: numpy computes both operands whole, and raises
    their IEEE flags (`1.0 / x` where x is 0 warns, or raises under
    `errstate`, even where `np.where` then takes the other value). Left to
    itself, LLVM folds the select into an AVX-512 masked division or
    multiply, and a masked lane raises nothing; a fence
    (`llvm.arithmetic.fence`, opaque to the optimizer) hides it from that fold."""
    t = v.type
    el = t.element if isinstance(t, ir.VectorType) else t
    if (not X86 or not isinstance(el, (ir.FloatType, ir.DoubleType))
            or not isinstance(v, ir.Instruction) or v.opname not in _FLOAT_OPS):
        return v
    return b.call(intrinsic("arithmetic.fence", t), [v])
