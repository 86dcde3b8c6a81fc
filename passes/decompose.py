"""`decompose`: rewrite `array.ufunc` into upstream `arith`/`math` ops and
`array.compare` wherever those have numpy's exact meaning for the operand
type; what remains (`maximum` with its -0.0/NaN rule, integer division by zero,
`hypot`, `logaddexp`, unsigned integers, ...) stays `array.ufunc`.

The table below is the whole pass: (numpy name, operand class) -> builder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import AnyFloat, IntegerType, ModuleOp, Signedness, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from dialects import array as A

Builder = Callable[[list[SSAValue]], Operation]

_FLOAT: dict[str, Builder] = {
    "add": lambda v: arith.AddfOp(*v),
    "subtract": lambda v: arith.SubfOp(*v),
    "multiply": lambda v: arith.MulfOp(*v),
    "divide": lambda v: arith.DivfOp(*v),
    "negative": lambda v: arith.NegfOp(*v),
    "absolute": lambda v: math.AbsFOp(*v),
    "fabs": lambda v: math.AbsFOp(*v),
    "sqrt": lambda v: math.SqrtOp(*v),
    "cbrt": lambda v: math.CbrtOp(*v),
    "exp": lambda v: math.ExpOp(*v),
    "exp2": lambda v: math.Exp2Op(*v),
    "expm1": lambda v: math.ExpM1Op(*v),
    "log": lambda v: math.LogOp(*v),
    "log2": lambda v: math.Log2Op(*v),
    "log10": lambda v: math.Log10Op(*v),
    "log1p": lambda v: math.Log1pOp(*v),
    "sin": lambda v: math.SinOp(*v),
    "cos": lambda v: math.CosOp(*v),
    "tan": lambda v: math.TanOp(*v),
    "arcsin": lambda v: math.AsinOp(*v),
    "arccos": lambda v: math.AcosOp(*v),
    "arctan": lambda v: math.AtanOp(*v),
    "sinh": lambda v: math.SinhOp(*v),
    "cosh": lambda v: math.CoshOp(*v),
    "tanh": lambda v: math.TanhOp(*v),
    "arcsinh": lambda v: math.AsinhOp(*v),
    "arccosh": lambda v: math.AcoshOp(*v),
    "arctanh": lambda v: math.AtanhOp(*v),
    "floor": lambda v: math.FloorOp(*v),
    "ceil": lambda v: math.CeilOp(*v),
    "trunc": lambda v: math.TruncOp(*v),
    "rint": lambda v: math.RoundEvenOp(*v),
    "copysign": lambda v: math.CopySignOp(*v),
    "power": lambda v: math.PowFOp(*v),  # capture already took numpy's x ** 0.5 -> sqrt
    "square": lambda v: arith.MulfOp(v[0], v[0]),
    "arctan2": lambda v: math.Atan2Op(*v),
}

# signed integers: two's-complement wrap-around is numpy's meaning
_INT: dict[str, Builder] = {
    "add": lambda v: arith.AddiOp(*v),
    "subtract": lambda v: arith.SubiOp(*v),
    "multiply": lambda v: arith.MuliOp(*v),
    "bitwise_and": lambda v: arith.AndIOp(*v),
    "bitwise_or": lambda v: arith.OrIOp(*v),
    "bitwise_xor": lambda v: arith.XOrIOp(*v),
    "maximum": lambda v: arith.MaxSIOp(*v),
    "minimum": lambda v: arith.MinSIOp(*v),
}
# bool (i1): numpy's add and multiply on bools are logical or / and
_BOOL: dict[str, Builder] = {
    "add": lambda v: arith.OrIOp(*v),
    "multiply": lambda v: arith.AndIOp(*v),
    "logical_and": lambda v: arith.AndIOp(*v),
    "logical_or": lambda v: arith.OrIOp(*v),
    "logical_xor": lambda v: arith.XOrIOp(*v),
    "bitwise_and": lambda v: arith.AndIOp(*v),
    "bitwise_or": lambda v: arith.OrIOp(*v),
    "bitwise_xor": lambda v: arith.XOrIOp(*v),
    "maximum": lambda v: arith.OrIOp(*v),
    "minimum": lambda v: arith.AndIOp(*v),
}
_COMPARE = {"equal": "eq", "not_equal": "ne", "less": "lt", "less_equal": "le",
            "greater": "gt", "greater_equal": "ge"}


def builder_for(op: A.UfuncOp) -> Builder | None:
    """The rewrite for `op`, or None where no upstream op has numpy's meaning."""
    name = op.fn.data
    in_t = op.inputs[0].type
    out_t = op.result.type
    assert isinstance(in_t, TensorType) and isinstance(out_t, TensorType)
    el = in_t.element_type
    if name in _COMPARE:
        # numpy's comparison loops: both operands of one type, a bool result
        if (len(op.inputs) == 2 and op.inputs[1].type == in_t
                and out_t.element_type == IntegerType(1)):
            return lambda v: A.CompareOp(_COMPARE[name], *v)
        return None
    if any(v.type != out_t for v in op.inputs):
        return None  # mixed-type loops (e.g. isnan: f -> i1) stay numpy ufuncs
    if isinstance(el, AnyFloat):
        return _FLOAT.get(name)
    if isinstance(el, IntegerType) and el.signedness.data == Signedness.SIGNLESS:
        if el.width.data == 1:
            return _BOOL.get(name)
        return _INT.get(name)
    return None  # unsigned integers: arith is signless


class DecomposeUfunc(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: A.UfuncOp, rewriter: PatternRewriter) -> None:
        build = builder_for(op)
        if build is None:
            return
        new = build(list(op.inputs))
        new.location = op.location
        rewriter.replace(op, new)


@dataclass(frozen=True)
class Decompose(ModulePass):
    name = "decompose"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(DecomposeUfunc(), apply_recursively=False).rewrite_module(op)
