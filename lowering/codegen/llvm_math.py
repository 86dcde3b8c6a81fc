"""Vectorized transcendental functions as LLVM IR (llvmlite), for the CPU backend.

Why: LLVM scalarizes a vector `llvm.exp`/`llvm.log`/... into one libm call per
lane, which makes softmax, GELU and Black-Scholes 5-10x slower than they need
to be. Every function here is plain vector arithmetic instead: fadd/fmul,
`llvm.fma`, fcmp/select, bitcasts and integer ops on the exponent bits, and the
`llvm.roundeven`/`floor`/`fabs`/`copysign`/`sqrt` intrinsics, which all stay
vector instructions on AVX2/AVX-512. No libm call is ever emitted.

API::

    math_function(module, name, dtype, width) -> ir.Function

returns (creating it once per module; found again through `module.globals`)
an internal, `alwaysinline` function `lowering.<name>.<dtype>x<width>` that
takes `SUPPORTED[name]` arguments of type `<width x float>` ("f32") or
`<width x double>` ("f64") and returns one such vector. Width 1 uses the
scalar `float`/`double` type (not `<1 x T>`), like the CPU backend's scalar
tail loops. `ULP_BOUND[(name, dtype)]` is the largest distance in ULPs from
numpy's own result that tests/codegen/test_llvm_math.py allows (numpy itself
is not correctly rounded: its float32 `log` is up to 4 ULP from the true
value, so a bound against numpy is our error plus numpy's).

Special values follow numpy (C99 Annex F): NaN in -> NaN out, exp(-inf) = 0,
exp(x > 88.72f) = inf, log(0) = log(-0) = -inf, log(x < 0) = NaN, tanh(+-inf) =
+-1, odd functions keep the sign of zero, results underflow gradually into
subnormals, subnormal inputs are exact, and `power` has all of C99's cases
(pow(x, +-0) = 1 even for NaN x, pow(1, y) = 1 even for NaN y, pow(-1, +-inf)
= 1, negative base with integer exponent, the signed zeros and infinities of
pow(+-0, y) and pow(-inf, y)).

How: classic range reduction + polynomial. exp-like functions reduce
x = n ln2 + r (Cody-Waite, ln2 split in a short high part and a low part),
evaluate a polynomial for e^r and scale by 2^n with two exponent-bit
multiplies (so results overflow to inf and underflow into subnormals with one
rounding). Hot functions branch on the whole vector (`fast_or_general`): when
every lane is in the ordinary range (exp: the result is normal), n comes from
one fma with a magic constant and 2^n is an integer add into the exponent
bits, with no clamps and no NaN selects; polynomials there use Estrin's scheme
for a short dependency chain. log-like functions split x = 2^k m (bitcasts) with m in
[sqrt(1/2), sqrt(2)), and use log(m) = 2 atanh(s), s = (m-1)/(m+1).
Trigonometric functions reduce by pi/2 in double precision: Cody-Waite with a
three-part pi/2 for |x| < 2^19, and an exact Payne-Hanek reduction (24-bit
chunks of 2/pi, partial products exact in double) for larger |x|, taken only
when some lane needs it. float32 versions of the functions that are rarely hot
(trigonometric, inverse trigonometric, cbrt, power) are the float64 code on
the widened vector, rounded once at the end: nearly correctly rounded and far
less code to get right.

The polynomial coefficients (`_COEFFS`) are weighted minimax fits made for
this file at development time with a Remez exchange in mpmath (50-90 digits),
each row documenting its function, interval, weight and achieved error; the
float32 rows were rounded coefficient by coefficient, refitting the rest after
each rounding. Constants such as ln2, pi and the bits of 2/pi are derived at
import from exact integer series (`_atanh_inv`, `_atan_inv`), not pasted.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from llvmlite import ir

from dialects.ufuncs import UFUNCS, UfuncTableError

__all__ = ["SUPPORTED", "ULP_BOUND", "math_function"]

# the functions implemented here, by numpy name -> number of arguments (the
# op table's nin: dialects/ufuncs.py)
SUPPORTED: dict[str, int] = {n: UFUNCS[n].nin for n in """
exp exp2 expm1 log log2 log10 log1p tanh sinh cosh sin cos tan arctan arcsin arccos arctan2
power cbrt""".split()}
if any(UFUNCS[n].exactness != "pointwise" for n in SUPPORTED):
    raise UfuncTableError("llvm_math: a vector function of an exact ufunc (dialects/ufuncs.py)")

# Max ULP distance from numpy's result, asserted by the tests. Measured over
# 8M-sample sweeps on AVX2 (numpy's own SIMD loops + glibc) and AVX-512 (numpy
# with SVML): our float32 functions are within 1 ULP of the correctly rounded
# result (the tests check that too) and float64 within 1 of numpy; what exceeds
# that here is numpy's own error (float32 exp 2 ULP, log 3, log10/sinh/cosh 2;
# glibc's float64 cbrt 3).
ULP_BOUND: dict[tuple[str, str], int] = {
    **{(n, "f32"): 2 for n in SUPPORTED},
    ("exp", "f32"): 3, ("log", "f32"): 4, ("log10", "f32"): 3, ("sinh", "f32"): 3,
    ("cosh", "f32"): 3,
    # numpy on AVX-512 (SVML) float32: up to 3 ULP from our correctly rounded results
    ("tan", "f32"): 3, ("arctan", "f32"): 3, ("arcsin", "f32"): 3, ("arccos", "f32"): 3,
    ("arctan2", "f32"): 3,
    **{(n, "f64"): 2 for n in SUPPORTED},
    ("cbrt", "f64"): 4,
}  # fmt: skip


# ---------------------------------------------------------------- constants
def _atanh_inv(q: int, bits: int) -> Fraction:
    """atanh(1/q) within 2^-(bits-8), from its Taylor series in integers."""
    one, total, k = 1 << bits, 0, 0
    term = one // q
    while term:
        total += term // (2 * k + 1)
        term //= q * q
        k += 1
    return Fraction(total, one)


def _atan_inv(q: int, bits: int) -> Fraction:
    """atan(1/q) within 2^-(bits-8), from its Taylor series in integers."""
    one, total, k = 1 << bits, 0, 0
    term = one // q
    while term:
        total += (-1) ** k * (term // (2 * k + 1))
        term //= q * q
        k += 1
    return Fraction(total, one)


_LN2 = 2 * _atanh_inv(3, 300)  # ln 2 = 2 atanh(1/3)
_LN10 = 3 * _LN2 + 2 * _atanh_inv(9, 300)  # ln 10 = 3 ln 2 + 2 atanh(1/9)
_PI = 16 * _atan_inv(5, 1400) - 4 * _atan_inv(239, 1400)  # Machin


def _round_to(q: Fraction, prec: int) -> float:
    """q rounded to `prec` significant bits, ties to even (exact as a float)."""
    if q == 0:
        return 0.0
    sign, q = (-1, -q) if q < 0 else (1, q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    scale = Fraction(2) ** (prec - 1 - e)
    return sign * float(Fraction(round(q * scale)) / scale)


@dataclass(frozen=True)
class _Format:
    name: str
    bits: int  # storage bits
    mant: int  # explicit mantissa bits
    bias: int

    @property
    def prec(self) -> int:
        return self.mant + 1

    @property
    def float(self) -> ir.Type:
        return ir.FloatType() if self.bits == 32 else ir.DoubleType()

    @property
    def int(self) -> ir.IntType:
        return ir.IntType(self.bits)

    def round(self, v: float | Fraction) -> float:
        q = Fraction(v)
        return _round_to(q, self.prec)

    def split(self, q: Fraction, hi_bits: int | None = None) -> tuple[float, float]:
        """q = hi + lo: hi has `hi_bits` significant bits, lo the rest, rounded."""
        hi = _round_to(q, hi_bits or self.prec)
        return hi, _round_to(q - Fraction(hi), self.prec)


F32 = _Format("f32", 32, 23, 127)
F64 = _Format("f64", 64, 52, 1023)
_FORMATS = {"f32": F32, "f64": F64}


def _hexes(text: str) -> tuple[float, ...]:
    """Whitespace-separated C99 hex floats (exact, unlike decimal)."""
    return tuple(float.fromhex(h) for h in text.split())


# Polynomial coefficients, lowest degree first. Each entry: (function fitted,
# variable and interval, weight, max weighted error with the rounded
# coefficients). See the module docstring for how they were made.
_COEFFS: dict[tuple[str, str], tuple[float, ...]] = {
    # e^r = 1 + r + r^2 Q(r); r in [-0.3467, 0.3467]; weight r^2 e^-r.
    # f32: 2^-28.2; f64: Q(0) = 1/2 fixed, 2^-61.7.
    ("exp_q", "f32"): _hexes(
        """
        0x1.fffffcp-2 0x1.555494p-3 0x1.555886p-5 0x1.12384p-7
        0x1.6a791ep-10
        """
    ),
    ("exp_q", "f64"): _hexes(
        """
        0x1p-1 0x1.5555555555558p-3 0x1.55555555554f1p-5 0x1.111111110fd17p-7
        0x1.6c16c16c4ef35p-10 0x1.a01a01ad4491fp-13 0x1.a01a005be42c8p-16 0x1.71ddfea6f74f3p-19
        0x1.27e7e538b35e6p-22 0x1.af5489b6698c8p-26 0x1.1a75ae90021b8p-29
        """
    ),
    # log(1+f) = 2s + s z G(z), s = f/(2+f), z = s^2 in [0, 0.02944]; weight z
    # (absolute error of z G). f32: 2^-29.2.
    ("log_g", "f32"): _hexes(
        """
        0x1.55557ap-1 0x1.995ed4p-2 0x1.31e0d8p-2
        """
    ),
    # log(1+f) = 2s + 2/3 s^3 + s^5 Q(z), same s and z; weight z^2. f64: 2^-65.5.
    ("log_q", "f64"): _hexes(
        """
        0x1.999999999999ap-2 0x1.249249249248bp-2 0x1.c71c71c71e75ap-3 0x1.745d1743d95f8p-3
        0x1.3b13b24771b3dp-3 0x1.1110bcc80dd86p-3 0x1.e201f4d6b4533p-4 0x1.ab88c4fe34c33p-4
        0x1.bee1858bdc3fcp-4
        """
    ),
    # tanh(x) = x + x^3 T(x^2); weight x^2 x/tanh(x). f32: x in [0, 0.55], 2^-29.7;
    # f64: x in [0, 0.4], 2^-58.3.
    ("tanh_t", "f32"): _hexes(
        """
        -0x1.55554ap-2 0x1.110ceep-3 -0x1.b91e7ep-5 0x1.58e518p-6
        -0x1.9921a2p-8
        """
    ),
    ("tanh_t", "f64"): _hexes(
        """
        -0x1.5555555555555p-2 0x1.111111111110bp-3 -0x1.ba1ba1ba1aecbp-5 0x1.664f488267ed4p-6
        -0x1.226e3544e360cp-7 0x1.d6d3c7aa02161p-9 -0x1.7da24ca0c21adp-10 0x1.3541ff2b4edb8p-11
        -0x1.f32944fd3a0d1p-13 0x1.8257fb1264a6cp-14 -0x1.c3760c13b6e4dp-16
        """
    ),
    # tanh(x) = x + x^3 W(x^2), x in [0, 0.7], the f32 fast form's range; same
    # weight; Lawson iterations on 4000 Chebyshev points, then rounded
    # coefficient by coefficient with refits: 2^-30.4.
    ("tanh_w", "f32"): _hexes(
        """
        -0x1.555550p-2 0x1.110f52p-3 -0x1.b9bb3cp-5 0x1.617fecp-6
        -0x1.02972cp-7 0x1.f2553ep-10
        """
    ),
    # sinh(x) = x + x^3 S(x^2), x in [0, 1]; weight x^2 x/sinh(x). f32: 2^-31.6.
    ("sinh_s", "f32"): _hexes(
        """
        0x1.555556p-3 0x1.1110ep-7 0x1.a022bcp-13 0x1.756c1ep-19
        """
    ),
    # f64: 2^-56.8.
    ("sinh_s", "f64"): _hexes(
        """
        0x1.5555555555555p-3 0x1.1111111111111p-7 0x1.a01a01a01a01ap-13 0x1.71de3a556c708p-19
        0x1.ae64567f5991ap-26 0x1.6124613466dd1p-33 0x1.ae7f4738ad72ep-41 0x1.9524e7c0e6c88p-49
        0x1.32e1d1bbb566ep-57
        """
    ),
    # sin(r) = r + r^3 S(r^2), r^2 in [0, 0.6169] (|r| <= pi/4); weight r^2 r/sin(r). 2^-57.1.
    ("sin_s", "f64"): _hexes(
        """
        -0x1.5555555555555p-3 0x1.111111111110bp-7 -0x1.a01a01a018a6cp-13 0x1.71de3a5330884p-19
        -0x1.ae64528d7a470p-26 0x1.61208c453d77ap-33 -0x1.aaa245d370f74p-41
        """
    ),
    # cos(r) = 1 - r^2/2 + r^4 C(r^2), same interval; weight r^4/cos(r). 2^-59.5.
    ("cos_c", "f64"): _hexes(
        """
        0x1.5555555555555p-5 -0x1.6c16c16c16c15p-10 0x1.a01a01a01975dp-16 -0x1.27e4fb76949e1p-22
        0x1.1eed8d41135a6p-29 -0x1.9393dce812065p-37 0x1.ab0a0c291864ap-45
        """
    ),
    # atan(t) = t + t^3 A(t^2), t^2 in [0, 0.17158] (|t| <= tan(pi/8)); weight
    # t^2 t/atan(t). 2^-58.2.
    ("atan_a", "f64"): _hexes(
        """
        -0x1.5555555555554p-2 0x1.999999999964bp-3 -0x1.2492492475663p-3 0x1.c71c71b7461e1p-4
        -0x1.745d14b91a0fep-4 0x1.3b136e1fe8732p-4 -0x1.110c720d3edf9p-4 0x1.e171f2748e9fep-5
        -0x1.ab7d31d6f1252p-5 0x1.70ec2f7ab3f0fp-5 -0x1.12359039fedabp-5 0x1.f1e15e299696ap-7
        """
    ),
    # asin(a) = a + a^3 B(a^2), a^2 in [0, 0.25]; weight a^2 a/asin(a). 2^-55.8.
    ("asin_b", "f64"): _hexes(
        """
        0x1.5555555555390p-3 0x1.333333336e7c9p-4 0x1.6db6db427c954p-5 0x1.f1c72c385cf3cp-6
        0x1.6e89f44cfadf3p-6 0x1.1c6be0fa44cd5p-6 0x1.c6fdcda33327bp-7 0x1.8ec2b50217004p-7
        0x1.abd1972e9d516p-8 0x1.3ff33f8aea7d6p-6 -0x1.09d1159d9251cp-6 0x1.056cc1b443ba0p-5
        """
    ),
    # cube root seed: cbrt(m), m in [1, 2]; relative error 2^-16.7 (Newton refines).
    ("cbrt0", "f64"): _hexes(
        """
        0x1.0392ce6939b3ep-1 0x1.6fb1db7413d0dp-1 -0x1.33d37b7296686p-2 0x1.60a1417d16cb3p-4
        -0x1.5b77d7e575261p-7
        """
    ),
}

# LLVM intrinsic names for the type suffix
_TYPE_SUFFIX = {"float": "f32", "double": "f64", "i1": "i1", "i32": "i32", "i64": "i64"}


# ---------------------------------------------------------------- emitter
class _E:
    """Arithmetic on splat-or-scalar values of one float format and width."""

    def __init__(
        self,
        module: ir.Module,
        b: ir.IRBuilder,
        fmt: _Format,
        width: int,
        result_prec: int | None = None,
    ) -> None:
        self.m, self.b, self.f, self.w = module, b, fmt, width
        self.ty = self._vt(fmt.float)
        self.ity = self._vt(fmt.int)
        self.bty = self._vt(ir.IntType(1))
        # precision the caller needs (lower when this is f64 code for an f32 result)
        self.result_prec = result_prec or fmt.prec

    def _vt(self, t: ir.Type) -> ir.Type:
        return t if self.w == 1 else ir.VectorType(t, self.w)

    # constants
    def c(self, v: float) -> ir.Value:
        v = float(v)
        if self.f.bits == 32 and math.isfinite(v):
            v = struct.unpack("<f", struct.pack("<f", v))[0]
        k = ir.Constant(self.f.float, v)
        return k if self.w == 1 else ir.Constant(self.ty, [k] * self.w)

    def ci(self, v: int) -> ir.Value:
        k = ir.Constant(self.f.int, v)
        return k if self.w == 1 else ir.Constant(self.ity, [k] * self.w)

    def cb(self, v: bool) -> ir.Value:
        k = ir.Constant(ir.IntType(1), int(v))
        return k if self.w == 1 else ir.Constant(self.bty, [k] * self.w)

    # float arithmetic (no fast-math flags: every op rounds as written)
    def add(self, x, y):
        return self.b.fadd(x, y)

    def sub(self, x, y):
        return self.b.fsub(x, y)

    def mul(self, x, y):
        return self.b.fmul(x, y)

    def div(self, x, y):
        return self.b.fdiv(x, y)

    def neg(self, x):
        return self.b.fneg(x)

    def intrinsic(
        self, name: str, nargs: int, ty: ir.Type | None = None, ret: ir.Type | None = None
    ) -> ir.Function:
        ty = ty or self.ty
        el = ty.element if isinstance(ty, ir.VectorType) else ty
        suffix = _TYPE_SUFFIX[str(el)]
        if isinstance(ty, ir.VectorType):
            suffix = f"v{ty.count}{suffix}"
        full = f"llvm.{name}.{suffix}"
        fn = self.m.globals.get(full)
        if fn is None:
            fn = ir.Function(self.m, ir.FunctionType(ret or ty, [ty] * nargs), full)
        return fn

    def call(self, name: str, *args):
        return self.b.call(self.intrinsic(name, len(args)), list(args))

    def fma(self, x, y, z):
        return self.call("fma", x, y, z)

    def rint(self, x):
        return self.call("roundeven", x)

    def floor(self, x):
        return self.call("floor", x)

    def fabs(self, x):
        return self.call("fabs", x)

    def sqrt(self, x):
        return self.call("sqrt", x)

    def copysign(self, mag, sign):
        return self.call("copysign", mag, sign)

    def poly(self, x, coeffs) -> ir.Value:
        """Horner: coeffs[0] + x coeffs[1] + ..., with one fma per step."""
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(k))
        return acc

    def estrin(self, x, x2, coeffs) -> ir.Value:
        """The same polynomial by Estrin's scheme (x2 = x*x given): as many
        fmas as Horner (plus a square per level past the second) but a
        dependency chain of ~log2(degree) of them, so that a loop keeps more
        vectors in flight."""
        terms = [self.c(k) for k in coeffs]
        power = x
        while len(terms) > 1:
            pairs = [terms[i : i + 2] for i in range(0, len(terms), 2)]
            terms = [self.fma(p[1], power, p[0]) if len(p) == 2 else p[0] for p in pairs]
            if len(terms) > 1:
                power = x2 if power is x else self.mul(power, power)
        return terms[0]

    # comparisons (ordered: false when either side is NaN) and selects
    def lt(self, x, y):
        return self.b.fcmp_ordered("<", x, y)

    def le(self, x, y):
        return self.b.fcmp_ordered("<=", x, y)

    def gt(self, x, y):
        return self.b.fcmp_ordered(">", x, y)

    def ge(self, x, y):
        return self.b.fcmp_ordered(">=", x, y)

    def eq(self, x, y):
        return self.b.fcmp_ordered("==", x, y)

    def isnan(self, x):
        return self.b.fcmp_unordered("uno", x, x)

    def sel(self, cond, x, y):
        return self.b.select(cond, x, y)

    def and_(self, x, y):
        return self.b.and_(x, y)

    def or_(self, x, y):
        return self.b.or_(x, y)

    def not_(self, x):
        return self.b.not_(x)

    def min_(self, x, c):
        """x if x < c else c; NaN x gives c (callers restore NaN at the end)."""
        return self.sel(self.lt(x, c), x, c)

    def max_(self, x, c):
        return self.sel(self.gt(x, c), x, c)

    def any(self, mask):
        if self.w == 1:
            return mask
        fn = self.intrinsic("vector.reduce.or", 1, ty=self.bty, ret=ir.IntType(1))
        return self.b.call(fn, [mask])

    def all(self, mask):
        if self.w == 1:
            return mask
        fn = self.intrinsic("vector.reduce.and", 1, ty=self.bty, ret=ir.IntType(1))
        return self.b.call(fn, [mask])

    def fast_or_general(self, ok, fast: Callable[[], ir.Value], general: Callable[[], ir.Value]):
        """fast() when every lane satisfies `ok`, else general(): a branch on
        the whole vector (marked likely), so the common case pays for neither
        the other's instructions nor a select."""
        b = self.b
        fast_bb = b.append_basic_block("fast")
        general_bb = b.append_basic_block("general")
        done = b.append_basic_block("joined")
        b.cbranch(self.all(ok), fast_bb, general_bb).set_weights([2000, 1])
        out = []
        for bb, emit in ((fast_bb, fast), (general_bb, general)):
            b.position_at_end(bb)
            out.append((emit(), b.block))
            b.branch(done)
        b.position_at_end(done)
        phi = b.phi(out[0][0].type)
        for v, bb in out:
            phi.add_incoming(v, bb)
        return phi

    # integer views
    def bits(self, x):
        return self.b.bitcast(x, self.ity)

    def from_bits(self, i):
        return self.b.bitcast(i, self.ty)

    def iadd(self, x, y):
        return self.b.add(x, y)

    def isub(self, x, y):
        return self.b.sub(x, y)

    def iand(self, x, y):
        return self.b.and_(x, y)

    def ishl(self, x, k):
        return self.b.shl(x, self.ci(k))

    def iashr(self, x, k):
        return self.b.ashr(x, self.ci(k))

    _MAGIC = 1.5 * 2.0**52  # adding it puts a small double integer in the low bits

    def round_magic(self, x, scale: float):
        """(t, n): n = x * scale rounded to an integer (one rounding, ties to
        even) and t = n + 1.5 2^mant, whose low bits hold n: `exponent_of(t)`
        turns it into 2^n without a float->int conversion. |n| < 2^(mant-1)."""
        magic = self.c(1.5 * 2.0**self.f.mant)
        t = self.fma(x, self.c(scale), magic)
        return t, self.sub(t, magic)

    def int_of(self, t):
        """n as an integer, for t from `round_magic`."""
        return self.isub(self.bits(t), self.bits(self.c(1.5 * 2.0**self.f.mant)))

    def exponent_of(self, t):
        """n << mant for t from `round_magic`: added to the bits of p it gives
        p 2^n (exact when p 2^n is normal)."""
        return self.ishl(self.bits(t), self.f.mant)

    def to_int(self, n):
        """Integer-valued float (|n| < 2^31 / 2^51) -> int of the same width.
        f64 uses the 1.5*2^52 trick: AVX2 has no vector double->i64 convert."""
        if self.f.bits == 32:
            return self.b.fptosi(n, self.ity)
        return self.isub(
            self.bits(self.add(n, self.c(self._MAGIC))), self.bits(self.c(self._MAGIC))
        )

    def to_float(self, i):
        """Small int (|i| < 2^31 / 2^51) -> float, the inverse of `to_int`."""
        if self.f.bits == 32:
            return self.b.sitofp(i, self.ty)
        magic = self.c(self._MAGIC)
        return self.sub(self.from_bits(self.iadd(i, self.bits(magic))), magic)

    def pow2i(self, n):
        """2^n for integer n in the normal exponent range."""
        return self.from_bits(self.ishl(self.iadd(n, self.ci(self.f.bias)), self.f.mant))

    def scale(self, p, n):
        """p * 2^n in two exact-or-final multiplies: n may reach twice the
        exponent range, and a subnormal result is rounded only once."""
        n1 = self.iashr(n, 1)
        return self.mul(self.mul(p, self.pow2i(n1)), self.pow2i(self.isub(n, n1)))

    def coeffs(self, name: str) -> tuple[float, ...]:
        return _COEFFS[(name, self.f.name)]

    def two_sum(self, a, b):
        s = self.add(a, b)
        bb = self.sub(s, a)
        err = self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))
        return s, err

    def fast_two_sum(self, a, b):
        """s + err = a + b exactly, given |a| >= |b| (or a = 0)."""
        s = self.add(a, b)
        return s, self.add(self.sub(a, s), b)

    def unsubnormal(self, a, shift: int):
        """a 2^shift for a subnormal a >= 0 (shift <= mant + 2), exactly and
        without a multiply: a's mantissa bits under the exponent of c = 2^(1 -
        bias + shift), minus c. Any other a gives a finite value and no flag
        (a product would overflow for a huge a, and LLVM folds a clamp of the
        factor into the select that picks the product)."""
        c = self.c(2.0 ** (1 - self.f.bias + shift))
        mant = self.iand(self.bits(a), self.ci((1 << self.f.mant) - 1))
        return self.sub(self.from_bits(self.b.or_(mant, self.bits(c))), c)

    # harmless operands: the arithmetic of a function runs on them where an
    # input is special, and the special result is selected, so that no IEEE
    # flag numpy does not raise comes from an intermediate (0 * inf, inf -
    # inf, a tiny square, a huge product); see `KernelCodegen.math_flags`
    def finite(self, x):
        """|x| < inf (false for NaN)."""
        return self.lt(self.fabs(x), self.c(float("inf")))

    def tiny(self, x):
        """0 < |x| < 2^-60 or x = 0: where functions with f(x) = x (1 + O(x))
        round to x, and those with f(x) = 1 + O(x) to 1."""
        return self.lt(self.fabs(x), self.c(TINY))

    def ordinary(self, x, fill: float = 0.0):
        """x where it is finite and not tiny, else `fill`."""
        return self.sel(self.and_(self.finite(x), self.not_(self.tiny(x))), x, self.c(fill))


TINY = 2.0**-60  # `_E.tiny`: x^3 and x^2 / 2 are far below half an ULP of x, and x^2 is normal


# ---------------------------------------------------------------- per-format constants
@dataclass(frozen=True)
class _Consts:
    ln2_hi: float  # ln2 with few enough bits that n * ln2_hi is exact for every n
    ln2_lo: float
    log2e: float
    ln2: tuple[float, float]  # full-precision hi, lo pairs
    log2e2: tuple[float, float]
    log10e: tuple[float, float]
    log10_2: tuple[float, float]
    exp_max: float  # exp(x) = inf above (clamp point, a little past overflow)
    exp_min: float  # exp(x) = 0 below
    exp_fast: float  # |x| below: exp(x) is normal, and so is p 2^n for p in [1/sqrt2, sqrt2]
    expm1_min: float  # expm1(x) = -1 below
    tanh_max: float  # tanh(x) rounds to 1 above
    tanh_poly: float  # tanh uses its polynomial below
    min_normal: float
    sub_shift: int  # subnormals are scaled by 2^sub_shift first
    sqrt_half_bits: int


def _make_consts(f: _Format) -> _Consts:
    def bits_of(v: float) -> int:
        code = "<f" if f.bits == 32 else "<d"
        return int.from_bytes(struct.pack(code, v), "little")

    f32 = f.bits == 32
    ln2_hi, ln2_lo = f.split(_LN2, 16 if f32 else 42)  # |n| < 2^8 / 2^11
    return _Consts(
        ln2_hi=ln2_hi, ln2_lo=ln2_lo, log2e=f.round(1 / _LN2),
        ln2=f.split(_LN2), log2e2=f.split(1 / _LN2), log10e=f.split(1 / _LN10),
        log10_2=f.split(_LN2 / _LN10),
        exp_max=89.0 if f32 else 710.0, exp_min=-104.0 if f32 else -746.0,
        exp_fast=87.0 if f32 else 708.0,
        expm1_min=-20.0 if f32 else -40.0,
        tanh_max=9.1 if f32 else 19.1, tanh_poly=0.55 if f32 else 0.4,
        min_normal=2.0 ** (1 - f.bias), sub_shift=25 if f32 else 54,
        sqrt_half_bits=bits_of(f.round(Fraction(0.7071067811865476))),
    )  # fmt: skip


_CONSTS = {name: _make_consts(f) for name, f in _FORMATS.items()}

# pi/2 pieces for Cody-Waite (double only): 33 + 33 + 53 bits, so q * piece is
# exact for |q| < 2^20; _TRIG_FAST_MAX bounds the arguments that take this path.
_PIO2_1, _rest = F64.split(_PI / 2, 33)
_PIO2_2 = _round_to(_PI / 2 - Fraction(_PIO2_1), 33)
_PIO2_3 = _round_to(_PI / 2 - Fraction(_PIO2_1) - Fraction(_PIO2_2), 53)
_TRIG_FAST_MAX = 2.0**19
_PIO2 = F64.split(_PI / 2)
_PIO4_50 = F64.split(_PI / 4, 50)  # k * hi exact for k <= 7
_PI_HL = F64.split(_PI)
_TWO_OVER_PI = F64.round(2 / _PI)
_TAN_PI8 = 0.41421356237309503  # tan(pi/8) = sqrt(2) - 1, region split only
_TAN_3PI8 = 2.414213562373095  # tan(3 pi/8)
# 2/pi = sum_i c_i 2^(-24 (i+1)), c_i in [0, 2^24): the Payne-Hanek table
_TWO_OVER_PI_CHUNKS = tuple(
    float(int((2 / _PI) * 2 ** (24 * (i + 1))) % (1 << 24)) for i in range(52)
)


# ---------------------------------------------------------------- exp family
def _exp_reduce(e: _E, x, hi: float, lo: float):
    """x clamped to [lo, hi] (NaN -> hi) = n ln2 + r, |r| <= ln2/2 (+ rounding)."""
    k = _CONSTS[e.f.name]
    xc = e.max_(e.min_(x, e.c(hi)), e.c(lo))
    n = e.rint(e.mul(xc, e.c(k.log2e)))
    nn = e.neg(n)
    r = e.fma(nn, e.c(k.ln2_lo), e.fma(nn, e.c(k.ln2_hi), xc))  # first fma exact
    return n, r


def _exp_tail(e: _E, r):
    """t with e^r = 1 + (r + t): t = r^2 Q(r)."""
    return e.mul(e.mul(r, r), e.poly(r, e.coeffs("exp_q")))


def _exp_parts(e: _E, x):
    """(t, s) with e^x = 2^n (1 + s), n held by t (`round_magic`), |s| <=
    sqrt2 - 1: n found by the magic-number rounding, r = x - n ln2 by
    Cody-Waite, e^r - 1 by an Estrin polynomial."""
    k = _CONSTS[e.f.name]
    t, n = e.round_magic(x, k.log2e)
    r = e.fma(n, e.c(-k.ln2_lo), e.fma(n, e.c(-k.ln2_hi), x))  # first fma exact
    r2 = e.mul(r, r)
    return t, e.fma(r2, e.estrin(r, r2, e.coeffs("exp_q")), r)


def _exp_core(e: _E, x):
    """(t, p) with e^x = p 2^n, p = 1 + s in [1/sqrt2, sqrt2]. Both exp
    paths use it, so a lane's result never depends on its neighbours."""
    t, s = _exp_parts(e, x)
    return t, e.add(e.c(1.0), s)


def _exp(e: _E, x):
    """Fast path when every lane's result is normal: 2^n is added into p's
    exponent bits. Otherwise x is clamped (NaN -> exp_max), p scaled in two
    steps (overflow to inf, gradual underflow with one rounding) and NaN put
    back."""
    k = _CONSTS[e.f.name]

    def fast():
        t, p = _exp_core(e, x)
        return e.from_bits(e.iadd(e.bits(p), e.exponent_of(t)))

    def general():
        # on finite x only (exp(+-inf) selected: clamped, they would overflow
        # or underflow); tiny x give 1 from 0
        xc = e.max_(e.min_(e.ordinary(x), e.c(k.exp_max)), e.c(k.exp_min))
        t, p = _exp_core(e, xc)
        special = e.sel(e.lt(x, e.c(0.0)), e.c(0.0), x)  # exp(-inf) = 0; inf, NaN
        return e.sel(e.finite(x), e.scale(p, e.int_of(t)), special)

    ok = e.lt(e.fabs(x), e.c(k.exp_fast))  # false for NaN
    return e.fast_or_general(ok, fast, general)


def _exp2(e: _E, x):
    """2^x = 2^n e^(r ln2), r = x - n exact; r ln2 is carried as hi + lo."""
    k = _CONSTS[e.f.name]
    hi, lo = e.f.mant + e.f.bias + 3, -(e.f.mant + e.f.bias + 4)  # 2^hi = inf, 2^lo = 0
    xc = e.max_(e.min_(e.ordinary(x), e.c(hi)), e.c(lo))
    n = e.rint(xc)
    r = e.sub(xc, n)
    rh = e.mul(r, e.c(k.ln2[0]))
    rl = e.fma(r, e.c(k.ln2[1]), e.fma(r, e.c(k.ln2[0]), e.neg(rh)))
    t = e.fma(e.mul(rh, rh), e.poly(rh, e.coeffs("exp_q")), rl)
    p = e.add(e.c(1.0), e.add(rh, t))
    special = e.sel(e.lt(x, e.c(0.0)), e.c(0.0), x)
    return e.sel(e.finite(x), e.scale(p, e.to_int(n)), special)


def _expm1_core(e: _E, x):
    """expm1 without the NaN / signed-zero fix-ups."""
    k = _CONSTS[e.f.name]
    n, r = _exp_reduce(e, x, k.exp_max, k.expm1_min)
    t = _exp_tail(e, r)
    top = float(e.f.prec)  # 2^n - 1 is exact up to n = prec
    s = e.pow2i(e.to_int(e.min_(n, e.c(top))))
    # 2^n (1 + r + t) - 1 = (2^n - 1 + 2^n r) + 2^n t, with one rounding inside
    small = e.fma(s, t, e.fma(s, r, e.sub(s, e.c(1.0))))
    large = e.sub(e.scale(e.add(e.c(1.0), e.add(r, t)), e.to_int(n)), e.c(1.0))
    return e.sel(e.gt(n, e.c(top)), large, small)


def _expm1(e: _E, x):
    res = e.sel(e.tiny(x), x, _expm1_core(e, e.ordinary(x)))
    special = e.sel(e.lt(x, e.c(0.0)), e.c(-1.0), x)  # expm1(-inf) = -1; inf, NaN
    return e.sel(e.finite(x), res, special)


def _half_exp(e: _E, ax):
    """e^ax / 2 as hi + lo for ax >= 0 (overflowing only where e^ax / 2 does),
    and 1 / (4 (hi + lo)) to first order."""
    k = _CONSTS[e.f.name]
    n, r = _exp_reduce(e, ax, k.exp_max + 1.0, k.exp_min)
    s = e.fma(e.mul(r, r), e.poly(r, e.coeffs("exp_q")), r)
    one = e.c(1.0)
    p = e.add(one, s)
    p_lo = e.add(e.sub(one, p), s)
    n = e.isub(e.to_int(n), e.ci(1))
    # 1/(4h) = (1/(4p)) 2^-n; where it would be subnormal, a stand-in far
    # below half an ULP of h (the exponent clamped by an integer min: a
    # select there would let LLVM divide by h itself in one arm)
    smin = e.intrinsic("smin", 2, ty=e.ity)
    m = e.b.call(smin, [n, e.ci(e.f.bias - 24)])
    return e.scale(p, n), e.scale(p_lo, n), e.scale(e.div(e.c(0.25), p), e.isub(e.ci(0), m))


def _sinh(e: _E, x):
    ax = e.fabs(x)
    axs = e.ordinary(ax)  # (the polynomial: +-inf, NaN and huge x give 0)
    a1 = e.min_(axs, e.c(1.0))
    z = e.mul(a1, a1)
    small = e.fma(e.mul(a1, z), e.poly(z, e.coeffs("sinh_s")), a1)
    h, h_lo, q = _half_exp(e, axs)
    large = e.add(e.sub(h, q), h_lo)
    res = e.copysign(e.sel(e.lt(ax, e.c(1.0)), small, large), x)
    return e.sel(e.and_(e.finite(x), e.not_(e.tiny(x))), res, x)  # +-inf, NaN, tiny: x


def _cosh(e: _E, x):
    ax = e.fabs(x)
    h, h_lo, q = _half_exp(e, e.ordinary(ax))
    return e.sel(e.finite(x), e.add(e.add(h, q), h_lo), ax)


def _tanh(e: _E, x):
    return _tanh_f32(e, x) if e.f is F32 else _tanh_f64(e, x)


def _tanh_f32(e: _E, x):
    """Polynomial below 0.7; above, 1 - q with q = 2/(e^2|x| + 1), where
    e^2|x| + 1 = 2^n (1 + s) + 1 is formed with one rounding (fma) and the
    division is plain: q <= 0.4 there, so its error stays under ~0.7 ULP of
    the result. NaN flows through the clamp (an unordered min) into q."""
    k = _CONSTS["f32"]
    ax = e.fabs(x)
    a1 = e.min_(ax, e.c(1.0))  # the polynomial's operand: no overflow, no inf * 0
    z = e.mul(a1, a1)
    small = e.fma(e.mul(a1, z), e.poly(z, e.coeffs("tanh_w")), a1)  # Horner: fewest fmas
    ac = e.sel(e.b.fcmp_unordered("<", ax, e.c(k.tanh_max)), ax, e.c(k.tanh_max))
    t, s = _exp_parts(e, e.add(ac, ac))
    p2n = e.from_bits(e.iadd(e.exponent_of(t), e.bits(e.c(1.0))))
    q = e.div(e.c(2.0), e.fma(p2n, s, e.add(p2n, e.c(1.0))))
    large = e.sub(e.c(1.0), q)
    return e.copysign(e.sel(e.lt(ax, e.c(0.7)), small, large), x)


def _tanh_f64(e: _E, x):
    """Polynomial below tanh_poly; above, em/(em + 2) with em = expm1(2|x|) >= 2
    (here 2^n - 1 needs no overflow care: |x| is clamped where tanh rounds to 1),
    the quotient t = em * (1/den) refined by its exact residual (den = em + 2
    kept as hi + lo)."""
    k = _CONSTS[e.f.name]
    ax = e.fabs(x)
    a1 = e.min_(ax, e.c(1.0))  # the polynomial's operand: no overflow, no inf * 0
    z = e.mul(a1, a1)
    small = e.fma(e.mul(a1, z), e.poly(z, e.coeffs("tanh_t")), a1)
    x2 = e.mul(e.c(2.0), e.min_(ax, e.c(k.tanh_max)))
    n = e.rint(e.mul(x2, e.c(k.log2e)))
    nn = e.neg(n)
    r = e.fma(nn, e.c(k.ln2_lo), e.fma(nn, e.c(k.ln2_hi), x2))
    s = e.pow2i(e.to_int(n))
    em = e.fma(s, _exp_tail(e, r), e.fma(s, r, e.sub(s, e.c(1.0))))
    den, den_lo = e.fast_two_sum(em, e.c(2.0))
    u = e.div(e.c(1.0), den)
    t = e.mul(em, u)
    rho = e.sub(e.fma(e.neg(t), den, em), e.mul(t, den_lo))
    large = e.fma(rho, u, t)
    res = e.copysign(e.sel(e.lt(ax, e.c(k.tanh_poly)), small, large), x)
    return e.sel(e.isnan(x), x, res)


# ---------------------------------------------------------------- log family
def _split_exponent(e: _E, a, subnormals: bool = True):
    """a > 0 finite (normal, or subnormal if `subnormals`) = 2^k m, m in
    [sqrt(1/2), sqrt(2)). Returns (k as float, m)."""
    k = _CONSTS[e.f.name]
    if subnormals:
        sub = e.lt(a, e.c(k.min_normal))
        a = e.sel(sub, e.unsubnormal(a, k.sub_shift), a)
    d = e.isub(e.bits(a), e.ci(k.sqrt_half_bits))
    kf = e.to_float(e.iashr(d, e.f.mant))
    if subnormals:
        kf = e.sub(kf, e.sel(sub, e.c(float(k.sub_shift)), e.c(0.0)))
    mask = (1 << e.f.mant) - 1
    m = e.from_bits(e.iadd(e.iand(d, e.ci(mask)), e.ci(k.sqrt_half_bits)))
    return kf, m


def _log_parts(e: _E, a, subnormals: bool = True):
    """log(a) = k ln2 + hi + lo for a > 0 finite; (hi + lo) = log(m) = 2 atanh(s)
    written as f - f^2/2 + s (f^2/2 + R), f = m - 1, s = f / (2 + f)."""
    kf, m = _split_exponent(e, a, subnormals)
    f = e.sub(m, e.c(1.0))
    s = e.div(f, e.add(f, e.c(2.0)))
    z = e.mul(s, s)
    if e.f.bits == 32:
        big_r = e.mul(z, e.poly(z, e.coeffs("log_g")))
    else:
        big_r = e.mul(z, e.fma(z, e.poly(z, e.coeffs("log_q")), e.c(2 / 3)))
    hfsq = e.mul(e.c(0.5), e.mul(f, f))
    hi = e.sub(f, hfsq)
    lo = e.add(e.sub(e.sub(f, hi), hfsq), e.mul(s, e.add(hfsq, big_r)))
    return kf, hi, lo


def _log_combine(e: _E, kf, hi, lo, base: tuple[float, float], scale: tuple[float, float] | None):
    """k base + (hi + lo) scale, with base = log_b(2) and scale = log_b(e)."""
    small = e.fma(kf, e.c(base[1]), lo if scale is None else e.mul(lo, e.c(scale[0])))
    if scale is None:
        y = e.add(hi, small)
    else:
        y = e.fma(hi, e.c(scale[0]), e.fma(hi, e.c(scale[1]), small))
    return e.fma(kf, e.c(base[0]), y)


def _log_regular(e: _E, a):
    """0 < a < inf."""
    return e.and_(e.gt(a, e.c(0.0)), e.lt(a, e.c(float("inf"))))


def _log_special(e: _E, a, res):
    """res where 0 < a < inf; else log's value at a (-inf, inf or NaN)."""
    inf = e.c(float("inf"))
    ok = _log_regular(e, a)
    special = e.sel(e.eq(a, e.c(0.0)), e.neg(inf), e.sel(e.gt(a, e.c(0.0)), a, e.c(float("nan"))))
    return e.sel(ok, res, special)


def _log_n(base: str | None, scale: str | None):
    """log, log2, log10. Fast path when every lane is a positive normal
    number: no subnormal scaling and no special-value selects (the same
    arithmetic otherwise, so a lane's result never depends on its
    neighbours)."""

    def impl(e: _E, x):
        k = _CONSTS[e.f.name]
        b = getattr(k, base) if base else (1.0, 0.0)
        sc = getattr(k, scale) if scale else None

        def fast():
            return _log_combine(e, *_log_parts(e, x, subnormals=False), b, sc)

        def general():
            xs = e.sel(_log_regular(e, x), x, e.c(1.0))  # (-huge x * 2^54 would overflow)
            return _log_special(e, x, _log_combine(e, *_log_parts(e, xs), b, sc))

        ok = e.and_(e.ge(x, e.c(k.min_normal)), e.lt(x, e.c(float("inf"))))
        return e.fast_or_general(ok, fast, general)

    return impl


def _log1p(e: _E, x):
    """log(u) + c, u = 1 + x rounded and c = (x - (u - 1)) / u its first-order
    correction, so tiny x give x exactly."""
    k = _CONSTS[e.f.name]
    one = e.c(1.0)
    u = e.add(one, x)
    regular = _log_regular(e, u)
    us = e.sel(regular, u, one)  # (u = 0: 0/0; u = inf: inf - inf)
    xs = e.sel(regular, x, e.c(0.0))
    c = e.div(e.sub(xs, e.sub(us, one)), us)
    kf, hi, lo = _log_parts(e, us)
    res = _log_special(e, u, _log_combine(e, kf, hi, e.add(lo, c), k.ln2, None))
    return e.sel(e.eq(x, e.c(0.0)), x, res)


def _log_dd(e: _E, a):
    """log(a) as hi + lo with relative error ~2^-64 (float64 `power` needs it:
    an error in y log|x| becomes a relative error of the result)."""
    k = _CONSTS[e.f.name]
    kf, m = _split_exponent(e, a)
    f = e.sub(m, e.c(1.0))
    two = e.c(2.0)
    d_hi = e.add(f, two)
    d_lo = e.add(e.sub(two, d_hi), f)
    s = e.div(f, d_hi)
    s_lo = e.div(e.sub(e.fma(e.neg(s), d_hi, f), e.mul(s, d_lo)), d_hi)
    sq = e.mul(s, s)
    sq_lo = e.fma(e.add(s, s), s_lo, e.fma(s, s, e.neg(sq)))
    cu = e.mul(sq, s)
    cu_lo = e.fma(sq, s_lo, e.fma(sq_lo, s, e.fma(sq, s, e.neg(cu))))
    tt = F64.split(Fraction(2, 3))
    t = e.mul(cu, e.c(tt[0]))
    t_lo = e.fma(cu_lo, e.c(tt[0]), e.fma(cu, e.c(tt[1]), e.fma(cu, e.c(tt[0]), e.neg(t))))
    tail = e.mul(e.mul(cu, sq), e.poly(sq, e.coeffs("log_q")))
    h, h_err = e.fast_two_sum(e.add(s, s), t)
    low = e.add(h_err, e.add(e.add(s_lo, s_lo), e.add(t_lo, tail)))
    p = e.mul(kf, e.c(k.ln2[0]))
    p_lo = e.fma(kf, e.c(k.ln2[1]), e.fma(kf, e.c(k.ln2[0]), e.neg(p)))
    big, big_err = e.two_sum(p, h)
    return e.fast_two_sum(big, e.add(big_err, e.add(p_lo, low)))


# ---------------------------------------------------------------- power
def _power(e: _E, x, y):
    """|x|^y = exp(y log|x|), then C99's special cases as selects. For an f32
    result this runs in f64 and a plain f64 log is accurate enough.

    The arithmetic raises no IEEE flag numpy's `pow` does not (numpy's flags
    come from `KernelCodegen.math_flags`, worked out from the inputs and the
    result): it runs on operands made harmless first — |x| = 1 where x is
    0, inf or NaN; y = 0 where y is infinite, NaN, tiny (then the result
    rounds to 1 anyway) or makes a negative x's result NaN, and where |x| =
    2^k with y k an integer (the result is 2^(y k) then, exactly: no
    rounding to raise underflow for an exact subnormal result); |y| <= 2^100
    (|y log|x|| past the exp clamp either way) — and the results of those
    lanes are selected; y's parity is read from its bits. What is left to
    the hardware is a finite result's own overflow or underflow, which numpy
    raises too."""
    k = _CONSTS[e.f.name]
    inf, one, zero = e.c(float("inf")), e.c(1.0), e.c(0.0)
    ax = e.fabs(x)
    ay = e.fabs(y)
    regular = e.and_(e.gt(ax, zero), e.lt(ax, inf))  # false for NaN
    axs = e.sel(regular, ax, one)
    y_fin = e.lt(ay, inf)  # false for NaN
    y_int = e.eq(e.rint(y), y)  # true for +-inf, false for NaN
    neg_finite = e.and_(e.lt(x, zero), e.gt(x, e.neg(inf)))
    y_frac = e.and_(y_fin, e.not_(y_int))
    invalid = e.and_(neg_finite, y_frac)  # NaN, and nothing else to raise
    ys = e.sel(e.and_(e.and_(y_fin, e.not_(invalid)), e.ge(ay, e.c(2.0**-70))), y, zero)
    big = e.c(2.0**100)
    ys = e.sel(e.gt(ys, big), big, e.sel(e.lt(ys, e.neg(big)), e.neg(big), ys))
    # |x| = 2^k and y k an integer: |x|^y = 2^(y k) exactly, as glibc's pow
    # gives it (for a subnormal 2^(y k), powf raises no underflow then: the
    # rounding of e^(y log|x|) would); the pipeline below runs on y = 0 there
    kx, mx = _split_exponent(e, axs)
    q = e.mul(ys, kx)  # (|ys| >= 2^-70 or 0, |kx| <= 1100: no flag)
    exact = e.and_(e.eq(mx, one), e.and_(e.eq(e.fma(ys, kx, e.neg(q)), zero), e.eq(e.rint(q), q)))
    lim = e.c(float(2 * e.f.bias - 4))  # `scale`'s range; 2^lim is inf, 2^-lim is 0
    q = e.sel(exact, e.max_(e.min_(q, lim), e.neg(lim)), zero)
    ys = e.sel(exact, zero, ys)
    if e.result_prec < e.f.prec:
        kf, hi, lo = _log_parts(e, axs)
        lg, lg_lo = _log_combine(e, kf, hi, lo, k.ln2, None), zero
    else:
        lg, lg_lo = _log_dd(e, axs)
    p = e.mul(ys, lg)
    p_lo = e.fma(ys, lg_lo, e.fma(ys, lg, e.neg(p)))
    # |p| >= 4096 is past the clamp: its low part (which may be tiny) is moot
    p_lo = e.sel(e.lt(e.fabs(p), e.c(4096.0)), p_lo, zero)
    # e^(p + p_lo) = 2^n e^(r + r_lo): here r is kept exactly (the Cody-Waite
    # step with the short ln2_hi is exact) and 1 + r as hi + lo, so the only
    # sizeable rounding is the last one
    pc = e.max_(e.min_(p, e.c(k.exp_max)), e.c(k.exp_min))
    n = e.rint(e.mul(pc, e.c(k.log2e)))
    nn = e.neg(n)
    r, r_lo = e.two_sum(e.fma(nn, e.c(k.ln2_hi), pc), e.fma(nn, e.c(k.ln2_lo), p_lo))
    one_r, one_r_lo = e.fast_two_sum(one, r)
    tail = e.fma(e.mul(r, r), e.poly(r, e.coeffs("exp_q")), e.add(r_lo, one_r_lo))
    res = e.scale(e.add(one_r, tail), e.to_int(n))
    res = e.sel(exact, e.scale(one, e.to_int(q)), res)
    # x = 0, inf, or y = +-inf with |x| != 1: 0 or inf, by the sign of y log|x|
    saturated = e.or_(e.not_(regular), e.not_(y_fin))
    grows = e.b.icmp_unsigned("==", e.gt(ax, one), e.gt(y, zero))
    res = e.sel(saturated, e.sel(grows, inf, zero), res)
    # signs and special cases. y is odd where it is an integer whose units bit
    # (the bit at 2^0 of its mantissa, the implicit one included) is set, for
    # 1 <= |y| < 2^(mant+1): integer ops, as no float op may take y itself
    # (one on a select of y and a harmless value is moved past the select by
    # LLVM, and a subnormal y * 0.5 raises underflow in every lane)
    ey = e.iand(e.b.lshr(e.bits(y), e.ci(e.f.mant)), e.ci((1 << (e.f.bits - 1 - e.f.mant)) - 1))
    units = e.isub(e.ci(e.f.bias + e.f.mant), ey)  # the units bit's place
    in_range = e.and_(e.b.icmp_signed(">=", units, e.ci(0)),
                      e.b.icmp_signed("<=", units, e.ci(e.f.mant)))
    my = e.b.or_(e.iand(e.bits(y), e.ci((1 << e.f.mant) - 1)), e.ci(1 << e.f.mant))
    bit = e.iand(e.b.lshr(my, e.sel(in_range, units, e.ci(0))), e.ci(1))
    y_odd = e.and_(e.and_(y_int, in_range), e.b.icmp_signed("!=", bit, e.ci(0)))
    x_neg = e.b.icmp_signed("<", e.bits(x), e.ci(0))
    res = e.sel(e.and_(x_neg, y_odd), e.neg(res), res)
    nan = e.or_(e.or_(e.isnan(x), e.isnan(y)), invalid)
    res = e.sel(nan, e.c(float("nan")), res)
    is_one = e.or_(e.eq(y, zero), e.eq(x, one))
    is_one = e.or_(is_one, e.and_(e.eq(x, e.c(-1.0)), e.eq(ay, inf)))
    return e.sel(is_one, one, res)


# ---------------------------------------------------------------- trigonometric (f64 code)
def _table(e: _E, name: str, values: tuple[float, ...]) -> ir.GlobalVariable:
    g = e.m.globals.get(name)
    if g is None:
        ty = ir.ArrayType(ir.DoubleType(), len(values))
        g = ir.GlobalVariable(e.m, ty, name)
        g.initializer = ir.Constant(ty, list(values))
        g.global_constant = True
        g.linkage = "internal"
    return g


def _gather(e: _E, table: ir.GlobalVariable, idx):
    """table[idx] per lane (scalar loads: only the rare huge-argument path)."""
    b, zero = e.b, ir.Constant(ir.IntType(32), 0)
    if e.w == 1:
        return b.load(b.gep(table, [zero, idx], inbounds=True))
    out = ir.Constant(e.ty, ir.Undefined)
    for lane in range(e.w):
        i = ir.Constant(ir.IntType(32), lane)
        v = b.load(b.gep(table, [zero, b.extract_element(idx, i)], inbounds=True))
        out = b.insert_element(out, v, i)
    return out


def _payne_hanek(e: _E, x):
    """x = q pi/2 + r exactly enough for any finite |x| >= 2^19: the product
    x * 2/pi mod 4 summed from the few 24-bit chunks of 2/pi that matter
    (earlier ones only add multiples of 4), each partial product exact."""
    ax = e.fabs(x)
    ib = e.bits(ax)
    ef = e.sub(e.to_float(e.iashr(ib, 52)), e.c(1023.0 + 52.0))  # x = M 2^ef
    mant = e.from_bits(e.b.or_(e.iand(ib, e.ci((1 << 52) - 1)), e.ci(0x3FF << 52)))
    big_m = e.mul(mant, e.c(2.0**52))
    m_hi = e.floor(e.mul(big_m, e.c(2.0**-26)))
    m_lo = e.fma(e.neg(m_hi), e.c(2.0**26), big_m)
    # first chunk whose product with M is not a multiple of 4
    k0 = e.max_(e.floor(e.mul(e.sub(ef, e.c(1.5)), e.c(1 / 24))), e.c(0.0))
    sc0 = e.sub(ef, e.mul(e.c(24.0), e.add(k0, e.c(1.0))))
    k0i = e.to_int(k0)
    table = _table(e, "lowering.two_over_pi_chunks", _TWO_OVER_PI_CHUNKS)
    acc, acc_lo = e.c(0.0), e.c(0.0)
    four, quarter = e.c(4.0), e.c(0.25)
    for j in range(8):
        cj = _gather(e, table, e.iadd(k0i, e.ci(j)))
        sc = e.to_int(e.sub(sc0, e.c(24.0 * j)))
        for part, shift in ((m_hi, 26), (m_lo, 0)):
            t = e.mul(e.mul(part, cj), e.pow2i(e.iadd(sc, e.ci(shift))))
            t = e.fma(e.neg(four), e.rint(e.mul(t, quarter)), t)  # exact mod 4
            acc, err = e.two_sum(acc, t)
            acc_lo = e.add(acc_lo, err)
            acc = e.fma(e.neg(four), e.rint(e.mul(acc, quarter)), acc)
    q = e.rint(acc)
    fr, fr_lo = e.fast_two_sum(e.sub(acc, q), acc_lo)
    r = e.mul(fr, e.c(_PIO2[0]))
    r_lo = e.fma(fr_lo, e.c(_PIO2[0]), e.fma(fr, e.c(_PIO2[1]), e.fma(fr, e.c(_PIO2[0]), e.neg(r))))
    neg = e.lt(x, e.c(0.0))
    qi = e.to_int(q)
    return (
        e.sel(neg, e.isub(e.ci(0), qi), qi),
        e.sel(neg, e.neg(r), r),
        e.sel(neg, e.neg(r_lo), r_lo),
    )


def _trig_reduce(e: _E, x):
    """(q, r, r_lo) with x = q pi/2 + r + r_lo, |r| <= pi/4 (+ rounding)."""
    q = e.rint(e.mul(x, e.c(_TWO_OVER_PI)))
    nq = e.neg(q)
    r1 = e.fma(nq, e.c(_PIO2_1), x)  # exact
    r2, err = e.two_sum(r1, e.mul(nq, e.c(_PIO2_2)))  # the product is exact
    r, r_lo = e.two_sum(r2, e.fma(nq, e.c(_PIO2_3), err))
    qi = e.to_int(e.sel(e.lt(e.fabs(q), e.c(2.0**30)), q, e.c(0.0)))
    ax = e.fabs(x)
    big = e.and_(e.ge(ax, e.c(_TRIG_FAST_MAX)), e.lt(ax, e.c(float("inf"))))
    b = e.b
    entry = b.block
    slow = b.append_basic_block("trig.huge")
    done = b.append_basic_block("trig.reduced")
    b.cbranch(e.any(big), slow, done)
    b.position_at_end(slow)
    sq, sr, sr_lo = _payne_hanek_lanes(e, x)
    sq, sr, sr_lo = e.sel(big, sq, qi), e.sel(big, sr, r), e.sel(big, sr_lo, r_lo)
    slow_end = b.block
    b.branch(done)
    b.position_at_end(done)
    out = []
    for fast_v, slow_v in ((qi, sq), (r, sr), (r_lo, sr_lo)):
        phi = b.phi(fast_v.type)
        phi.add_incoming(fast_v, entry)
        phi.add_incoming(slow_v, slow_end)
        out.append(phi)
    return out[0], out[1], out[2]


_REDUCE_RESULT = ir.LiteralStructType([ir.IntType(64), ir.DoubleType(), ir.DoubleType()])


def _payne_hanek_scalar(module: ir.Module) -> ir.Function:
    """`lowering.payne_hanek.f64(double) -> {i64 q, double r, double r_lo}`: one
    shared out-of-line copy per module, so the rare huge-argument path costs
    little code (and compile time) in each vector function."""
    name = "lowering.payne_hanek.f64"
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(_REDUCE_RESULT, [ir.DoubleType()]), name)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        fn.attributes.add("nounwind")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        q, r, r_lo = _payne_hanek(_E(module, b, F64, 1), fn.args[0])
        res = ir.Constant(_REDUCE_RESULT, ir.Undefined)
        for i, v in enumerate((q, r, r_lo)):
            res = b.insert_value(res, v, i)
        b.ret(res)
    return fn


def _payne_hanek_lanes(e: _E, x):
    """The scalar reduction on every lane, in a loop over the lanes."""
    fn, b = _payne_hanek_scalar(e.m), e.b
    if e.w == 1:
        res = b.call(fn, [x])
        return tuple(b.extract_value(res, i) for i in range(3))
    i32 = ir.IntType(32)
    pre = b.block
    loop = b.append_basic_block("payne_hanek.lane")
    after = b.append_basic_block("payne_hanek.done")
    b.branch(loop)
    b.position_at_end(loop)
    lane = b.phi(i32)
    lane.add_incoming(ir.Constant(i32, 0), pre)
    vecs = [b.phi(t) for t in (e.ity, e.ty, e.ty)]
    for v in vecs:
        v.add_incoming(ir.Constant(v.type, ir.Undefined), pre)
    res = b.call(fn, [b.extract_element(x, lane)])
    new = [b.insert_element(v, b.extract_value(res, i), lane) for i, v in enumerate(vecs)]
    nxt = b.add(lane, ir.Constant(i32, 1))
    lane.add_incoming(nxt, loop)
    for v, n in zip(vecs, new):
        v.add_incoming(n, loop)
    b.cbranch(b.icmp_unsigned("<", nxt, ir.Constant(i32, e.w)), loop, after)
    b.position_at_end(after)
    return tuple(new)


def _sin_kernel(e: _E, r, r_lo):
    """sin(r + r_lo) as hi + lo, |r| <= pi/4."""
    z = e.mul(r, r)
    v = e.mul(z, r)
    r_lo = e.fma(e.mul(e.c(-0.5), z), r_lo, r_lo)  # r_lo cos(r)
    return e.fast_two_sum(r, e.fma(v, e.poly(z, e.coeffs("sin_s")), r_lo))


def _cos_kernel(e: _E, r, r_lo):
    """cos(r + r_lo) as hi + lo, |r| <= pi/4; 1 - r^2/2 keeps its rounding error."""
    one = e.c(1.0)
    z = e.mul(r, r)
    z_lo = e.fma(r, r, e.neg(z))
    hz = e.mul(e.c(0.5), z)
    w = e.sub(one, hz)
    corr = e.sub(e.sub(e.sub(one, w), hz), e.fma(e.c(0.5), z_lo, e.mul(r, r_lo)))
    return e.fast_two_sum(w, e.fma(e.mul(z, z), e.poly(z, e.coeffs("cos_c")), corr))


def _trig(which: str):
    def impl(e: _E, x0):
        tiny = e.tiny(x0)
        x = e.sel(tiny, e.c(0.0), x0)  # (r^2 would underflow): sin, tan = x, cos = 1
        q, r, r_lo = _trig_reduce(e, x)
        (s, s_lo), (c, c_lo) = _sin_kernel(e, r, r_lo), _cos_kernel(e, r, r_lo)
        odd = e.b.icmp_signed("!=", e.iand(q, e.ci(1)), e.ci(0))
        if which == "tan":  # s/c, or -c/s in odd quadrants, refined by the residual
            num, num_lo = e.sel(odd, e.neg(c), s), e.sel(odd, e.neg(c_lo), s_lo)
            den, den_lo = e.sel(odd, s, c), e.sel(odd, s_lo, c_lo)
            u = e.div(e.c(1.0), den)
            t = e.mul(num, u)
            rho = e.add(e.fma(e.neg(t), den, num), e.fma(e.neg(t), den_lo, num_lo))
            res = e.fma(rho, u, t)
        else:
            if which == "cos":
                s, c = c, s
                q = e.iadd(q, e.ci(1))
            res = e.sel(odd, c, s)
            flip = e.b.icmp_signed("!=", e.iand(q, e.ci(2)), e.ci(0))
            res = e.sel(flip, e.neg(res), res)
        if which != "cos":
            res = e.sel(tiny, x0, res)
        return e.sel(e.finite(x0), res, e.c(float("nan")))

    return impl


# ---------------------------------------------------------------- inverse trigonometric (f64 code)
def _atan_eval(e: _E, t, t_lo, kq, sgn):
    """kq pi/4 + sgn atan(t + t_lo), |t| <= tan(pi/8), kq in 0..4."""
    st, st_lo = e.mul(sgn, t), e.mul(sgn, t_lo)
    tz = e.sel(e.tiny(t), e.c(0.0), t)  # t^3 is negligible there, and t^2 might underflow
    z = e.mul(tz, tz)
    s, err = e.fast_two_sum(e.mul(kq, e.c(_PIO4_50[0])), st)
    tail = e.fma(e.mul(st, z), e.poly(z, e.coeffs("atan_a")), e.fma(e.neg(z), st_lo, st_lo))
    return e.add(s, e.add(err, e.fma(kq, e.c(_PIO4_50[1]), tail)))


def _div_lo(e: _E, num, num_lo, den, den_lo, t):
    """The low part of (num + num_lo) / (den + den_lo) given t = num / den; 0
    where it is not finite (infinite or zero den)."""
    rho = e.sub(e.add(e.fma(e.neg(t), den, num), num_lo), e.mul(t, den_lo))
    lo = e.div(rho, den)
    return e.sel(e.lt(e.fabs(lo), e.c(float("inf"))), lo, e.c(0.0))


def _arctan(e: _E, x):
    a = e.min_(e.fabs(x), e.c(2.0**60))  # atan rounds to pi/2 above; inf, NaN: no 0 * inf
    one, zero = e.c(1.0), e.c(0.0)
    r1 = e.le(a, e.c(_TAN_PI8))
    r3 = e.gt(a, e.c(_TAN_3PI8))
    d2, d2_lo = e.two_sum(a, one)
    num = e.sel(r3, e.c(-1.0), e.sel(r1, a, e.sub(a, one)))  # a - 1 exact there
    den = e.sel(r3, a, e.sel(r1, one, d2))
    den_lo = e.sel(e.or_(r1, r3), zero, d2_lo)
    t = e.div(num, den)
    t_lo = _div_lo(e, num, zero, den, den_lo, t)
    kq = e.sel(r1, zero, e.sel(r3, e.c(2.0), one))
    res = e.copysign(_atan_eval(e, t, t_lo, kq, one), x)
    return e.sel(e.isnan(x), x, res)


def _arctan2(e: _E, y, x):
    """The angle of mn/mx = min/max(|y|, |x|) by `_atan_eval`, then the
    quadrant. Where the ratio is below 2^-60 (judged on the bit patterns,
    which raise no flag) the angle is mn / mx itself, rounded once, and no
    residual or square of it is formed; where that quotient is not the result
    (pi/2 or pi is, or it rounds to 0, or mx is infinite) mn is 0 instead."""
    ax, ay = e.fabs(x), e.fabs(y)
    one, zero, inf = e.c(1.0), e.c(0.0), e.c(float("inf"))
    swap = e.gt(ay, ax)
    mx, mn = e.sel(swap, ay, ax), e.sel(swap, ax, ay)
    both_inf = e.and_(e.eq(ax, inf), e.eq(ay, inf))
    mx, mn = e.sel(both_inf, one, mx), e.sel(both_inf, one, mn)
    gap = e.isub(e.bits(mx), e.bits(mn))  # >= 0 (mx >= mn >= 0) unless NaN
    mx_inf = e.eq(mx, inf)
    ratio_tiny = e.or_(e.b.icmp_signed(">", gap, e.ci(61 << e.f.mant)), mx_inf)
    ratio_zero = e.or_(e.b.icmp_signed(">", gap, e.ci(1080 << e.f.mant)), mx_inf)
    x_neg = e.b.icmp_signed("<", e.bits(x), e.ci(0))
    quotient = e.not_(e.or_(e.or_(swap, x_neg), ratio_zero))
    mn = e.sel(e.and_(ratio_tiny, e.not_(quotient)), zero, mn)
    mx = e.sel(mx_inf, one, mx)
    mx = e.sel(e.eq(mx, zero), one, mx)  # both zero: angle 0 before the quadrant fix
    # keep mn + mx finite and the residual of mn / mx out of the subnormals
    # (not for a tiny ratio: mn / 4 might underflow, mn + mx is mx)
    sc = e.sel(e.and_(e.gt(mx, e.c(2.0**1000)), e.not_(ratio_tiny)), e.c(0.25),
               e.sel(e.lt(mx, e.c(2.0**-900)), e.c(2.0**200), one))
    mx, mn = e.mul(mx, sc), e.mul(mn, sc)
    r1 = e.le(mn, e.mul(mx, e.c(_TAN_PI8)))
    n2, n2_lo = e.two_sum(mn, e.neg(mx))
    d2, d2_lo = e.two_sum(mn, mx)
    num, num_lo = e.sel(r1, mn, n2), e.sel(r1, zero, n2_lo)
    den, den_lo = e.sel(r1, mx, d2), e.sel(r1, zero, d2_lo)
    t = e.div(num, den)
    # (a tiny ratio's residual might be subnormal: from t = 0 instead, then dropped)
    t_lo = _div_lo(e, num, num_lo, den, den_lo, e.sel(ratio_tiny, zero, t))
    t_lo = e.sel(ratio_tiny, zero, t_lo)
    kq = e.sel(r1, zero, one)
    kq = e.sel(swap, e.sub(e.c(2.0), kq), kq)
    sgn = e.sel(swap, e.c(-1.0), one)
    kq = e.sel(x_neg, e.sub(e.c(4.0), kq), kq)
    sgn = e.sel(x_neg, e.neg(sgn), sgn)
    res = e.copysign(_atan_eval(e, t, t_lo, kq, sgn), y)
    # a NaN in: x + y of the NaN operands only (inf - inf of the other lanes
    # would raise invalid: the add runs in every lane)
    xn, yn = e.isnan(x), e.isnan(y)
    nan = e.add(e.sel(xn, x, zero), e.sel(yn, y, zero))
    return e.sel(e.or_(xn, yn), nan, res)


def _asin_parts(e: _E, a):
    """For a in [0.5, 1]: asin(a) = pi/2 - 2 (s + u), s = sqrt((1 - a)/2) and u
    small (the sqrt's rounding error plus the polynomial). NaN for a > 1."""
    w = e.mul(e.sub(e.c(1.0), a), e.c(0.5))
    s = e.sqrt(w)
    c = e.div(e.fma(e.neg(s), s, w), e.sel(e.gt(s, e.c(0.0)), e.add(s, s), e.c(1.0)))
    u = e.fma(e.mul(s, w), e.poly(w, e.coeffs("asin_b")), c)
    return s, u


def _asin_domain(e: _E, x):
    """(in_domain, a, x): |x| <= 1, and |x| and x where it holds and is not
    tiny, else 0 (no huge square, no sqrt of a negative)."""
    ok = e.le(e.fabs(x), e.c(1.0))  # false for NaN
    xs = e.sel(e.and_(ok, e.not_(e.tiny(x))), x, e.c(0.0))
    return ok, e.fabs(xs), xs


def _arcsin(e: _E, x):
    ok, a, _ = _asin_domain(e, x)
    z = e.mul(a, a)
    small = e.fma(e.mul(a, z), e.poly(z, e.coeffs("asin_b")), a)
    s, u = _asin_parts(e, a)
    hi, err = e.fast_two_sum(e.c(_PIO2[0]), e.neg(e.add(s, s)))
    large = e.add(hi, e.sub(e.add(err, e.c(_PIO2[1])), e.add(u, u)))
    res = e.copysign(e.sel(e.le(a, e.c(0.5)), small, large), x)
    return e.sel(ok, e.sel(e.tiny(x), x, res), e.c(float("nan")))


def _arccos(e: _E, x0):
    ok, a, x = _asin_domain(e, x0)  # arccos(tiny) rounds to pi/2 = arccos(0)
    z = e.mul(x, x)
    hi, err = e.fast_two_sum(e.c(_PIO2[0]), e.neg(x))
    mid = e.add(
        hi, e.sub(e.add(err, e.c(_PIO2[1])), e.mul(e.mul(x, z), e.poly(z, e.coeffs("asin_b"))))
    )
    s, u = _asin_parts(e, a)
    pos = e.mul(e.c(2.0), e.add(s, u))
    hi2, err2 = e.fast_two_sum(e.c(_PI_HL[0]), e.neg(e.add(s, s)))
    negv = e.add(hi2, e.sub(e.add(err2, e.c(_PI_HL[1])), e.add(u, u)))
    res = e.sel(e.le(a, e.c(0.5)), mid, e.sel(e.gt(x, e.c(0.0)), pos, negv))
    return e.sel(ok, res, e.c(float("nan")))


def _cbrt(e: _E, x):
    """Seed polynomial on the mantissa, one Newton step, then one Newton step
    with the residual y^3 - v computed exactly."""
    a = e.fabs(x)
    sub = e.lt(a, e.c(2.0**-1022))
    a2 = e.sel(sub, e.unsubnormal(a, 54), a)
    ib = e.bits(a2)
    ef = e.sub(e.to_float(e.iashr(ib, 52)), e.c(1023.0))
    ef = e.sub(ef, e.sel(sub, e.c(54.0), e.c(0.0)))
    m = e.from_bits(e.b.or_(e.iand(ib, e.ci((1 << 52) - 1)), e.ci(0x3FF << 52)))
    q = e.floor(e.mul(e.add(ef, e.c(0.5)), e.c(1 / 3)))
    j = e.sub(ef, e.mul(e.c(3.0), q))  # 0, 1 or 2
    j1, j2 = e.eq(j, e.c(1.0)), e.eq(j, e.c(2.0))
    v = e.mul(m, e.sel(j1, e.c(2.0), e.sel(j2, e.c(4.0), e.c(1.0))))
    cbrt2, cbrt4 = 2.0 ** (1 / 3), 4.0 ** (1 / 3)  # seed only: rounding is harmless
    y = e.mul(e.poly(m, e.coeffs("cbrt0")), e.sel(j1, e.c(cbrt2), e.sel(j2, e.c(cbrt4), e.c(1.0))))
    y = e.fma(e.sub(y, e.div(v, e.mul(y, y))), e.c(-1 / 3), y)
    y2 = e.mul(y, y)
    y2_lo = e.fma(y, y, e.neg(y2))
    resid = e.fma(y2_lo, y, e.fma(y2, y, e.neg(v)))
    y = e.sub(y, e.div(resid, e.mul(e.c(3.0), y2)))
    res = e.copysign(e.mul(y, e.pow2i(e.to_int(q))), x)
    special = e.or_(e.or_(e.eq(a, e.c(0.0)), e.eq(a, e.c(float("inf")))), e.isnan(x))
    return e.sel(special, e.add(x, x), res)


# ---------------------------------------------------------------- the table
# name -> (implementation, whether float32 runs the float64 code)
_IMPLS: dict[str, tuple[Callable[..., ir.Value], bool]] = {
    "exp": (_exp, False),
    "exp2": (_exp2, False),
    "expm1": (_expm1, False),
    "log": (_log_n("ln2", None), False),
    "log2": (_log_n(None, "log2e2"), False),
    "log10": (_log_n("log10_2", "log10e"), False),
    "log1p": (_log1p, False),
    "tanh": (_tanh, False),
    "sinh": (_sinh, False),
    "cosh": (_cosh, False),
    "sin": (_trig("sin"), True),
    "cos": (_trig("cos"), True),
    "tan": (_trig("tan"), True),
    "arctan": (_arctan, True),
    "arcsin": (_arcsin, True),
    "arccos": (_arccos, True),
    "arctan2": (_arctan2, True),
    "power": (_power, True),
    "cbrt": (_cbrt, True),
}
assert set(_IMPLS) == set(SUPPORTED)


def math_function(module: ir.Module, name: str, dtype: str, width: int) -> ir.Function:
    """The vectorized `name` for `width` lanes of `dtype` ("f32"/"f64"), emitted
    into `module` once and found again by its name `lowering.<name>.<dtype>x<width>`."""
    if name not in _IMPLS:
        raise KeyError(f"no vector math rule for {name!r}; known: {', '.join(sorted(_IMPLS))}")
    if dtype not in _FORMATS:
        raise ValueError(f"vector math: dtype must be 'f32' or 'f64', got {dtype!r}")
    if width < 1:
        raise ValueError(f"vector math: width must be >= 1, got {width}")
    fname = f"lowering.{name}.{dtype}x{width}"
    existing = module.globals.get(fname)
    if existing is not None:
        return existing
    fmt = _FORMATS[dtype]
    impl, widen = _IMPLS[name]
    ty = fmt.float if width == 1 else ir.VectorType(fmt.float, width)
    fn = ir.Function(module, ir.FunctionType(ty, [ty] * SUPPORTED[name]), fname)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    if widen and fmt is F32:
        e = _E(module, b, F64, width, result_prec=F32.prec)
        res = b.fptrunc(impl(e, *[b.fpext(a, e.ty) for a in fn.args]), ty)
    else:
        res = impl(_E(module, b, fmt, width), *fn.args)
    b.ret(res)
    return fn
