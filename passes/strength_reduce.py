"""`strength-reduce`: float `power` by a constant small integer becomes
multiplications (`z**3` costs numpy a `pow` call per element; two multiplies
are exact to within an ULP of it, and x**2 is exact)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import AnyFloat, ModuleOp, TensorType
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from dialects import array as A

MAX_EXPONENT = 4


def constant_value(v: SSAValue) -> float | None:
    """The splat value behind v (through broadcasts), if it is a constant."""
    op = v.owner
    while isinstance(op, A.BroadcastOp):
        op = op.input.owner
    if isinstance(op, A.ConstantOp) and not op.value.data.startswith("bytes:"):
        try:
            return float(op.value.data)
        except ValueError:
            return None
    return None


class PowerToMultiply(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: xmath.PowFOp, rewriter: PatternRewriter) -> None:
        t = op.result.type
        if not (isinstance(t, TensorType) and isinstance(t.element_type, AnyFloat)):
            return
        e = constant_value(op.rhs)
        if e is None or not math.isfinite(e) or e != int(e) or not 2 <= e <= MAX_EXPONENT:
            return
        x = op.lhs
        sq = arith.MulfOp(x, x)
        new = [sq]
        if e == 3:
            new.append(arith.MulfOp(sq.result, x))
        elif e == 4:
            new.append(arith.MulfOp(sq.result, sq.result))
        rewriter.replace(op, new)


def _splat(value: float, t: TensorType) -> A.ConstantOp:
    return A.ConstantOp(repr(float(value)), t)


class HalfPowerToSqrt(RewritePattern):
    """float `power` by 1.5, -1.5 or -0.5 (softened gravity's
    `(r2 + eps) ** -1.5`) becomes a square root and a multiply or divisions:
    `x * sqrt(x)`, `(1 / x) / sqrt(x)`, `1 / sqrt(x)` — two or three
    roundings, within 2.5 ULPs of numpy's `pow` (itself within 1 of the
    exact value), where the vectorized `pow` costs 3.8 ns per float64 on
    one core against glibc's 2. (numpy itself computes `x ** 0.5` as
    `sqrt(x)` and `x ** -1` as `1 / x`; those stay `pow` here, which the
    emitters already compute so.) C99's special cases are numpy's: the
    square root reads +inf where x is -inf (pow(-inf, y) is +inf or +0
    here, with no invalid flag, where sqrt(-inf) is NaN and raises it),
    and pow(-0, y) for y < 0 is +inf, where 1 / -0 is -inf. Every other
    input raises the flags pow does: divide for +-0 to a negative power,
    invalid (sqrt's) for a finite negative x, overflow and underflow where
    the result does (1 / x first: a tiny x overflows there, as pow does;
    x * sqrt(x) underflows only where x ** 1.5 does)."""

    EXPONENTS = (1.5, -1.5, -0.5)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: xmath.PowFOp, rewriter: PatternRewriter) -> None:
        t = op.result.type
        if not (isinstance(t, TensorType) and isinstance(t.element_type, AnyFloat)
                and op.lhs.type == t):
            return
        e = constant_value(op.rhs)
        if e not in self.EXPONENTS:
            return
        x = op.lhs
        inf, ninf, zero, one = (_splat(v, t) for v in (math.inf, -math.inf, 0.0, 1.0))
        new: list = [inf, ninf, zero, one]
        is_ninf = A.CompareOp("eq", x, ninf.result)
        xs = A.SelectOp(is_ninf.result, inf.result, x)  # (sqrt(-inf) would raise invalid)
        root = xmath.SqrtOp(xs.result)
        new += [is_ninf, xs, root]
        if e == 1.5:
            r = arith.MulfOp(x, root.result)
            new.append(r)
            special = A.SelectOp(is_ninf.result, inf.result, r.result)  # pow(-inf, 1.5) = inf
            new.append(special)
        else:
            if e == -1.5:
                inv = arith.DivfOp(one.result, x)
                r = arith.DivfOp(inv.result, root.result)
                new += [inv, r]
            else:
                r = arith.DivfOp(one.result, root.result)
                new.append(r)
            # +-0 to a negative power is +inf (the divisions give -inf for -0);
            # -inf to it is +0 (1 / -inf is -0)
            is_zero = A.CompareOp("eq", x, zero.result)
            at_zero = A.SelectOp(is_zero.result, inf.result, r.result)
            special = A.SelectOp(is_ninf.result, zero.result, at_zero.result)
            new += [is_zero, at_zero, special]
        rewriter.replace(op, new, [special.result])


class InverseSquare(RewritePattern):
    """float `power` by -2 (an inverse-square law's `r ** -2`) becomes
    `(1 / x) * (1 / x)`: within 1.5 ULPs of x ** -2 (numpy's pow is within 1
    of it), where the vectorized pow costs twice glibc's. The reciprocal
    first, so that what overflows or underflows does where pow does (a tiny
    x overflows in 1 / x, a huge one underflows in the square, with pow's
    flags; x * x first would overflow where pow underflows), and C99's cases
    come out of it: +-0 gives +inf (with pow's divide flag), +-inf gives +0,
    a negative x a positive result."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: xmath.PowFOp, rewriter: PatternRewriter) -> None:
        t = op.result.type
        if not (isinstance(t, TensorType) and isinstance(t.element_type, AnyFloat)
                and op.lhs.type == t) or constant_value(op.rhs) != -2.0:
            return
        one = _splat(1.0, t)
        inv = arith.DivfOp(one.result, op.lhs)
        sq = arith.MulfOp(inv.result, inv.result)
        rewriter.replace(op, [one, inv, sq], [sq.result])


@dataclass(frozen=True)
class StrengthReduce(ModulePass):
    name = "strength-reduce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GreedyRewritePatternApplier(
            [PowerToMultiply(), HalfPowerToSqrt(), InverseSquare()])).rewrite_module(op)
