"""The ops handler for LLVM: one entry per scalar op (upstream arith/math,
`loop.const`, `loop.cast`, `loop.ufunc` by numpy name), each giving numpy's
meaning for scalars or vectors of `w` lanes."""

from __future__ import annotations

import math
from collections.abc import Callable

import llvmlite.ir as ir

from dialects import ufuncs as U

from .llvm import (
    FM,
    I1,
    I8,
    I32,
    I64,
    const,
    is_float,
    is_unsigned,
    llvm_type,
    llvm_math,
    np_extreme,
    parse_const,
    vec,
)

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
_MATH_OPS = {op: name for op, name in U.UPSTREAM.items() if op.startswith("math.")}


def float_math(cg, name: str, args, ty: ir.Type, w: int):
    """A float function of numpy's name on scalars or vectors."""
    b = cg.b
    if name in _VECTOR_INTRINSICS:
        return b.call(cg.em.intrinsic(_VECTOR_INTRINSICS[name], ty, len(args)), args)
    el = ty.element if isinstance(ty, ir.VectorType) else ty
    if isinstance(el, ir.HalfType):  # numpy computes float16 functions in float32
        ft = vec(ir.FloatType(), w)
        r = float_math(cg, name, [b.fpext(a, ft) for a in args], ft, w)
        return b.fptrunc(r, ty)
    dt = {"float": "f32", "double": "f64"}.get(str(el))
    if (llvm_math is not None and dt is not None and hasattr(llvm_math, "math_function")
            and name in llvm_math.SUPPORTED):
        f = llvm_math.math_function(cg.em.module, name, dt, w)
        return b.call(f, args)
    sym = _LIBM[name]
    f = cg.em.libm(sym, el, len(args))
    if w == 1:
        return b.call(f, args)
    out = ir.Constant(ty, ir.Undefined)
    for lane in range(w):
        x = [b.extract_element(a, const(I32, lane)) for a in args]
        out = b.insert_element(out, b.call(f, x), const(I32, lane))
    return out


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


def scalar_op(cg, op, args, w: int):
    name = op.name
    rt = op.results[0].type
    b = cg.b
    if name == "loop.const":
        return const(llvm_type(rt), parse_const(op.value.data, rt), w)
    if name == "loop.cast":
        return cast(cg, args[0], op.input.type, rt, w)
    if name == "loop.ufunc":
        return ufunc(cg, op.fn.data, args, [o.type for o in op.inputs], rt, w)
    if name == "arith.select":
        return b.select(args[0], args[1], args[2])
    if name == "arith.index_cast":
        return cg.index_as_data(op.input, w)
    if name == "affine.apply":
        return cg.index_as_data(op.result, w)
    if name == "arith.cmpf":
        pred = op.predicate.value.data
        names = ["false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge",
                 "ult", "ule", "une", "uno", "true"]
        p = names[pred]
        sym = {"eq": "==", "gt": ">", "ge": ">=", "lt": "<", "le": "<=", "ne": "!="}
        if p in ("ord", "uno"):
            return b.fcmp_ordered("ord", *args) if p == "ord" else b.fcmp_unordered("uno", *args)
        if p[0] == "o":
            return b.fcmp_ordered(sym[p[1:]], *args)
        return b.fcmp_unordered(sym[p[1:]], *args)
    if name == "arith.cmpi":
        names = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]
        p = names[op.predicate.value.data]
        sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
        if p in ("eq", "ne"):
            return b.icmp_signed(sym[p], *args)
        return (b.icmp_signed if p[0] == "s" else b.icmp_unsigned)(sym[p[1:]], *args)
    rule = _SIMPLE.get(name)
    if rule is not None:
        return rule(cg, args)
    if name in _MATH_OPS:
        return float_math(cg, _MATH_OPS[name], args, args[0].type, w)
    raise NotImplementedError(f"LLVM emitter: no rule for {name}")


# upstream arith ops (and math.fma) that are one LLVM instruction
_SIMPLE: dict[str, Callable] = {
    "arith.addf": lambda cg, a: cg.b.fadd(*a, flags=FM),
    "arith.subf": lambda cg, a: cg.b.fsub(*a, flags=FM),
    "arith.mulf": lambda cg, a: cg.b.fmul(*a, flags=FM),
    "arith.divf": lambda cg, a: cg.b.fdiv(*a, flags=FM),
    "arith.negf": lambda cg, a: cg.b.fneg(a[0]),
    "math.fma": lambda cg, a: cg.b.call(cg.em.intrinsic("fma", a[0].type, 3), a),
    "arith.addi": lambda cg, a: cg.b.add(*a), "arith.subi": lambda cg, a: cg.b.sub(*a),
    "arith.muli": lambda cg, a: cg.b.mul(*a), "arith.andi": lambda cg, a: cg.b.and_(*a),
    "arith.ori": lambda cg, a: cg.b.or_(*a), "arith.xori": lambda cg, a: cg.b.xor(*a),
    "arith.maxsi": lambda cg, a: cg.b.select(cg.b.icmp_signed(">=", *a), *a),
    "arith.minsi": lambda cg, a: cg.b.select(cg.b.icmp_signed("<=", *a), *a),
}


def cast(cg, x, src, dst, w: int):
    """numpy's astype (unsafe) on x86."""
    b = cg.b
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
    if is_float(src) and isinstance(st, ir.HalfType):  # via float32: the limits below
        x, st = b.fpext(x, vec(ir.FloatType(), w)), ir.FloatType()  # do not fit in half
        sty = vec(st, w)
    if is_float(src):
        # x86 cvtt: NaN and out-of-range give the "integer indefinite" INT_MIN of
        # the 32/64-bit conversion; narrower types truncate the 32-bit result
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
    # int -> int
    if st.width == dt.width:
        return x
    if st.width > dt.width:
        return b.trunc(x, dty)
    return b.zext(x, dty) if is_unsigned(src) else b.sext(x, dty)


def ufunc(cg, fn: str, args, in_types, rt, w: int):
    b = cg.b
    t0 = in_types[0]
    ty = args[0].type
    f = is_float(t0)
    uns = is_unsigned(t0)
    a = args[0]
    y = args[1] if len(args) > 1 else None
    if fn in ("floor", "ceil", "trunc", "rint") and not f:
        return a  # integer loops: the value itself
    if fn in ("maximum", "minimum"):
        return np_extreme(cg, fn == "maximum", t0, a, y)
    if fn in ("fmax", "fmin"):
        if f:  # NaN is ignored unless both are NaN
            m = np_extreme(cg, fn == "fmax", t0, a, y)
            return b.select(isnan(b, a), y, b.select(isnan(b, y), a, m))
        return np_extreme(cg, fn == "fmax", t0, a, y)
    if fn in ("add", "subtract", "multiply"):
        if f:
            return {"add": b.fadd, "subtract": b.fsub, "multiply": b.fmul}[fn](a, y, flags=FM)
        if llvm_type(t0) == I1:
            return b.or_(a, y) if fn == "add" else b.and_(a, y)
        return {"add": b.add, "subtract": b.sub, "multiply": b.mul}[fn](a, y)
    if fn == "divide":
        return b.fdiv(a, y, flags=FM)
    if fn == "negative":
        return b.fneg(a) if f else b.sub(iconst(ty, 0), a)
    if fn == "absolute":
        if f:
            return float_math(cg, "fabs", [a], ty, w)
        if uns:
            return a
        return b.select(b.icmp_signed("<", a, iconst(ty, 0)), b.sub(iconst(ty, 0), a), a)
    if fn == "square":
        return b.fmul(a, a, flags=FM) if f else b.mul(a, a)
    if fn == "reciprocal":
        return b.fdiv(fconst(ty, 1.0), a)
    if fn == "sign":
        if f:
            one, zero = fconst(ty, 1.0), fzero(ty)
            r = b.select(b.fcmp_ordered(">", a, zero), one,
                         b.select(b.fcmp_ordered("<", a, zero), fconst(ty, -1.0), zero))
            return b.select(isnan(b, a), a, r)
        zero = iconst(ty, 0)
        if uns:
            return b.zext(b.icmp_unsigned("!=", a, zero), ty) if ty != I1 else a
        pos = b.zext(b.icmp_signed(">", a, zero), ty)
        neg = b.zext(b.icmp_signed("<", a, zero), ty)
        return b.sub(pos, neg)
    if fn in ("isnan", "isinf", "isfinite", "signbit"):
        if not f:
            if fn == "signbit":
                return b.icmp_signed("<", a, iconst(ty, 0)) if not uns else iconst(i1_like(ty), 0)
            return iconst(i1_like(ty), 1 if fn == "isfinite" else 0)
        if fn == "isnan":
            return isnan(b, a)
        ab = float_math(cg, "fabs", [a], ty, w)
        inf = fconst(ty, math.inf)
        if fn == "isinf":
            return b.fcmp_ordered("==", ab, inf)
        if fn == "isfinite":
            return b.fcmp_ordered("<", ab, inf)
        el = ty.element if isinstance(ty, ir.VectorType) else ty
        it = vec(ir.IntType(64 if str(el) == "double" else 32 if str(el) == "float" else 16), w)
        return b.icmp_signed("<", b.bitcast(a, it), iconst(it, 0))
    if fn in ("logical_and", "logical_or", "logical_xor", "logical_not"):
        def truth(v, t):
            if llvm_type(t) == I1:
                return v
            if is_float(t):
                return b.fcmp_unordered("!=", v, fzero(v.type))
            return b.icmp_signed("!=", v, iconst(v.type, 0))
        xs = [truth(v, t) for v, t in zip(args, in_types)]
        if fn == "logical_not":
            return b.xor(xs[0], iconst(xs[0].type, 1))
        return {"logical_and": b.and_, "logical_or": b.or_, "logical_xor": b.xor}[fn](*xs)
    if fn in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        return {"bitwise_and": b.and_, "bitwise_or": b.or_, "bitwise_xor": b.xor}[fn](a, y)
    if fn == "invert":
        return b.xor(a, iconst(ty, -1 if ty != I1 and not (isinstance(ty, ir.VectorType) and ty.element == I1) else 1))
    if fn in ("left_shift", "right_shift"):
        width = (ty.element if isinstance(ty, ir.VectorType) else ty).width
        inrange = b.icmp_unsigned("<", y, iconst(ty, width))  # negative counts are huge unsigned
        if fn == "left_shift":
            return b.select(inrange, b.shl(a, b.select(inrange, y, iconst(ty, 0))), iconst(ty, 0))
        safe = b.select(inrange, y, iconst(ty, 0))
        if uns:
            return b.select(inrange, b.lshr(a, safe), iconst(ty, 0))
        fill = b.select(b.icmp_signed("<", a, iconst(ty, 0)), iconst(ty, -1), iconst(ty, 0))
        return b.select(inrange, b.ashr(a, safe), fill)
    if fn in ("floor_divide", "remainder", "fmod"):
        return divmod_op(cg, fn, a, y, t0, ty, w)
    if fn == "hypot":
        ax, ay = float_math(cg, "fabs", [a], ty, w), float_math(cg, "fabs", [y], ty, w)
        hi = b.select(b.fcmp_ordered(">=", ax, ay), ax, ay)
        lo = b.select(b.fcmp_ordered(">=", ax, ay), ay, ax)
        safe = b.select(b.fcmp_ordered("==", hi, fzero(ty)), fconst(ty, 1.0), hi)
        q = b.fdiv(lo, safe)
        r = b.fmul(hi, float_math(cg, "sqrt", [b.fadd(fconst(ty, 1.0), b.fmul(q, q))], ty, w))
        inf = fconst(ty, math.inf)
        anyinf = b.or_(b.fcmp_ordered("==", ax, inf), b.fcmp_ordered("==", ay, inf))
        r = b.select(b.or_(isnan(b, a), isnan(b, y)), fconst(ty, math.nan), r)
        return b.select(anyinf, inf, r)
    if fn in ("logaddexp", "logaddexp2"):
        base2 = fn == "logaddexp2"
        ln2 = math.log(2.0)
        eq = b.fcmp_ordered("==", a, y)
        tmp = b.fsub(a, y)
        pos = b.fcmp_ordered(">", tmp, fzero(ty))
        neg_abs = b.select(pos, b.fneg(tmp), tmp)  # -|tmp|
        big = b.select(pos, a, y)
        if base2:
            e = float_math(cg, "exp2", [neg_abs], ty, w)
            corr = b.fmul(float_math(cg, "log1p", [e], ty, w), fconst(ty, 1.0 / ln2))
            same = b.fadd(a, fconst(ty, 1.0))
        else:
            corr = float_math(cg, "log1p", [float_math(cg, "exp", [neg_abs], ty, w)], ty, w)
            same = b.fadd(a, fconst(ty, ln2))
        r = b.fadd(big, corr)
        r = b.select(isnan(b, tmp), tmp, r)
        return b.select(eq, same, r)
    if fn in ("deg2rad", "radians"):
        return b.fmul(a, fconst(ty, math.pi / 180.0))
    if fn in ("rad2deg", "degrees"):
        return b.fmul(a, fconst(ty, 180.0 / math.pi))
    if fn == "heaviside":
        zero = fzero(ty)
        r = b.select(b.fcmp_ordered("<", a, zero), zero, fconst(ty, 1.0))
        r = b.select(b.fcmp_ordered("==", a, zero), y, r)
        return b.select(isnan(b, a), a, r)
    if fn == "copysign":
        return float_math(cg, "copysign", [a, y], ty, w)
    if fn == "ldexp":
        return ldexp(cg, a, y, ty, w)
    if fn in _LIBM or fn in _VECTOR_INTRINSICS:
        return float_math(cg, fn, list(args), ty, w)
    raise NotImplementedError(f"LLVM emitter: no rule for ufunc {fn}")


def ldexp(cg, x, n, ty, w: int):
    """x * 2**n rounded once, as C's scalbn (musl's steps): an n beyond the
    exponent range scales x first, by 2**emax up to twice, or by 2**(emin +
    digits) up to twice, so that a subnormal result is rounded only by the last
    multiply. The factors are selected, not the products: a step not taken
    raises no flag. n (int32 or int64) is clamped where every x saturates."""
    b = cg.b
    el = ty.element if isinstance(ty, ir.VectorType) else ty
    f64 = str(el) == "double"
    emax, digits, lim = (1023, 53, 3000) if f64 else (127, 24, 300)
    it = vec(ir.IntType(64 if f64 else 32), w)
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


def _element_width(t) -> int:
    return (t.element if isinstance(t, ir.VectorType) else t).width


def divmod_op(cg, fn, a, y, t0, ty, w):
    b = cg.b
    if is_float(t0):
        mod = b.frem(a, y)  # C fmod
        if fn == "fmod":
            return mod
        zero = fzero(ty)
        # numpy's npy_divmod
        mod_nz = b.fcmp_unordered("!=", mod, zero)  # C truthiness: NaN is nonzero
        fix = b.and_(mod_nz, b.xor(b.fcmp_ordered("<", y, zero), b.fcmp_ordered("<", mod, zero)))
        if fn == "remainder":
            m = b.select(fix, b.fadd(mod, y), mod)
            m = b.select(mod_nz, m, float_math(cg, "copysign", [zero, y], ty, w))
            return b.select(b.fcmp_ordered("==", y, zero), mod, m)
        div = b.fdiv(b.fsub(a, mod), y)
        div = b.select(fix, b.fsub(div, fconst(ty, 1.0)), div)
        fl = float_math(cg, "floor", [div], ty, w)
        fl = b.select(b.fcmp_ordered(">", b.fsub(div, fl), fconst(ty, 0.5)), b.fadd(fl, fconst(ty, 1.0)), fl)
        q = b.fdiv(a, y)
        r = b.select(b.fcmp_unordered("!=", div, zero), fl, float_math(cg, "copysign", [zero, q], ty, w))
        return b.select(b.fcmp_ordered("==", y, zero), q, r)
    zero = iconst(ty, 0)
    ydz = b.icmp_signed("==", y, zero)
    uns = is_unsigned(t0)
    safe_y = b.select(ydz, iconst(ty, 1), y)
    if uns:
        if fn == "floor_divide":
            return b.select(ydz, zero, b.udiv(a, safe_y))
        return b.select(ydz, zero, b.urem(a, safe_y))
    # signed: avoid INT_MIN / -1 trapping: numpy gives INT_MIN for //, 0 for %
    m1 = b.icmp_signed("==", y, iconst(ty, -1))
    safe_y = b.select(m1, iconst(ty, 1), safe_y)
    q = b.sdiv(a, safe_y)
    r = b.srem(a, safe_y)
    if fn == "fmod":
        return b.select(b.or_(ydz, m1), zero, r)
    if fn == "floor_divide":
        q = b.select(m1, b.sub(zero, a), q)
        adj = b.and_(b.icmp_signed("!=", r, zero), b.xor(b.icmp_signed("<", r, zero), b.icmp_signed("<", y, zero)))
        q = b.select(b.and_(adj, b.not_(m1)), b.sub(q, iconst(ty, 1)), q)
        return b.select(ydz, zero, q)
    adj = b.and_(b.icmp_signed("!=", r, zero), b.xor(b.icmp_signed("<", r, zero), b.icmp_signed("<", y, zero)))
    r = b.select(adj, b.add(r, y), r)
    return b.select(b.or_(ydz, m1), zero, r)


# ---- completeness against the op table (dialects/ufuncs.py) ----------------
# the loop.ufunc names `ufunc` above handles: its own branches, then the
# float functions of `float_math` (a test reads the branches and compares)
UFUNC_BRANCHES = frozenset("""
floor ceil trunc rint maximum minimum fmax fmin add subtract multiply divide negative absolute
square reciprocal sign isnan isinf isfinite signbit logical_and logical_or logical_xor
logical_not bitwise_and bitwise_or bitwise_xor invert left_shift right_shift floor_divide
remainder fmod hypot logaddexp logaddexp2 deg2rad radians rad2deg degrees heaviside copysign
ldexp
""".split())
HANDLED_UFUNCS = UFUNC_BRANCHES | set(_LIBM) | set(_VECTOR_INTRINSICS)
U.require(HANDLED_UFUNCS, lambda u: u.generated, "lowering/codegen/llvm_ops.py ufunc()")
U.require_upstream(set(_SIMPLE) | {op for op, n in _MATH_OPS.items()
                                   if n in _LIBM or n in _VECTOR_INTRINSICS},
                   "lowering/codegen/llvm_ops.py scalar_op()")
