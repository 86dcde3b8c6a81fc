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


@dataclass(frozen=True)
class StrengthReduce(ModulePass):
    name = "strength-reduce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(PowerToMultiply()).rewrite_module(op)
