"""`decompose`: rewrite `array.ufunc` into upstream `arith`/`math` ops and
`array.compare` wherever those have numpy's exact meaning for the operand
type; what remains (`maximum` with its -0.0/NaN rule, integer division by zero,
`hypot`, `logaddexp`, unsigned integers, ...) stays `array.ufunc`.

The whole pass is a table, the op table's (dialects/ufuncs.py) float, int
and bool columns: (numpy name, operand class) -> builder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
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
from dialects import ufuncs as U
from dialects.symbols import same_type

Builder = Callable[[list[SSAValue]], Operation]


def _builder(op_name: str, nin: int) -> Builder:
    """Build the upstream op on the ufunc's operands; an op of more operands
    than the ufunc gets its operand repeated (`square`: x * x)."""
    cls = U.upstream_class(op_name)
    arity = len(cls.get_irdl_definition().operands)
    if arity == nin:
        return lambda v: cls(*v)
    if nin == 1:
        return lambda v: cls(*(v * arity))
    raise U.UfuncTableError(f"decompose: {op_name} takes {arity} operands, the ufunc {nin}")


def _rewrites(column: str) -> dict[str, Builder]:
    return {u.name: _builder(getattr(u, column), u.nin) for u in U.TABLE
            if getattr(u, column) is not None}


# the table's float, int and bool columns (dialects/ufuncs.py)
_FLOAT: dict[str, Builder] = _rewrites("float_op")
# signed integers: two's-complement wrap-around is numpy's meaning
_INT: dict[str, Builder] = _rewrites("int_op")
# bool (i1): numpy's add and multiply on bools are logical or / and
_BOOL: dict[str, Builder] = _rewrites("bool_op")
_COMPARE = {u.name: u.compare for u in U.TABLE if u.compare is not None}


def builder_for(op: A.UfuncOp) -> Builder | None:
    """The rewrite for `op`, or None where no upstream op has numpy's meaning."""
    name = op.fn.data
    in_t = op.inputs[0].type
    out_t = op.result.type
    assert isinstance(in_t, TensorType) and isinstance(out_t, TensorType)
    el = in_t.element_type
    if name in _COMPARE:
        # numpy's comparison loops: both operands of one type, a bool result
        if (len(op.inputs) == 2 and same_type(op.inputs[1].type, in_t)
                and out_t.element_type == IntegerType(1)):
            return lambda v: A.CompareOp(_COMPARE[name], *v)
        return None
    if any(not same_type(v.type, out_t) for v in op.inputs):
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
