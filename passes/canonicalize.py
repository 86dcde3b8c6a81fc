"""`array-canonicalize`: local simplifications of structural ops that hold for
every value (no float identity like x+0 -> x, which is wrong for -0.0)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from dialects import array as A
from dialects.symbols import same_type


class FoldIdentity(RewritePattern):
    """broadcast/reshape/cast to the operand's own type are no-ops."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: A.BroadcastOp | A.ReshapeOp | A.CastOp,
                          rewriter: PatternRewriter) -> None:
        if same_type(op.input.type, op.result.type):
            rewriter.replace(op, [], [op.input])


class ReshapeOfReshape(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: A.ReshapeOp, rewriter: PatternRewriter) -> None:
        src = op.input.owner
        if isinstance(src, A.ReshapeOp):
            rewriter.replace(op, A.ReshapeOp(src.input, op.result.type))


class TransposeOfTranspose(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: A.TransposeOp, rewriter: PatternRewriter) -> None:
        src = op.input.owner
        if isinstance(src, A.TransposeOp):
            inner, outer = A.ints(src.permutation), A.ints(op.permutation)
            perm = [inner[p] for p in outer]
            if perm == sorted(perm):
                rewriter.replace(op, [], [src.input])
            else:
                rewriter.replace(op, A.TransposeOp(src.input, perm, op.result.type))


class SliceOfInsertSlice(RewritePattern):
    """Reading back exactly the window just written yields what was written
    — where that is free to read (an argument, or a view of one) or where
    the assignment is then read by nothing else (it goes away). A computed
    value the array keeps is read from the array: folded, it has a second
    reader, which computes it again (`B[1:-1] = f(A); A[1:-1] = g(B)`
    stepped in a loop computed each step's stencil over all the earlier
    ones) or gets a buffer of its own, copied into the array's."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: A.SliceOp, rewriter: PatternRewriter) -> None:
        src = op.input.owner
        if (isinstance(src, A.InsertSliceOp) and src.start == op.start and src.step == op.step
                and same_type(src.source.type, op.result.type)
                and (_free(src.source) or all(_same_window(u.operation, src)
                                              for u in src.result.uses))):
            rewriter.replace(op, [], [src.source])


def _free(v) -> bool:
    """v is an argument, or a view of one: reading it computes nothing."""
    while isinstance(v.owner, (A.SliceOp, A.BroadcastOp, A.TransposeOp, A.ReshapeOp)):
        v = v.owner.operands[0]
    return not isinstance(v.owner, Operation)


def _same_window(user: Operation, ins: A.InsertSliceOp) -> bool:
    return (isinstance(user, A.SliceOp) and user.start == ins.start and user.step == ins.step
            and same_type(ins.source.type, user.result.type))


class InsertSliceTwice(RewritePattern):
    """Writing a window again with what it already holds changes nothing:
    `x[w] -= y` stores its result through the view and again by the
    assignment (the same source, the same window, twice)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: A.InsertSliceOp, rewriter: PatternRewriter) -> None:
        inner = op.dest.owner
        if (isinstance(inner, A.InsertSliceOp) and inner.source is op.source
                and inner.start == op.start and inner.step == op.step):
            rewriter.replace(op, [], [inner.result])


@dataclass(frozen=True)
class ArrayCanonicalize(ModulePass):
    name = "array-canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GreedyRewritePatternApplier([
            FoldIdentity(), ReshapeOfReshape(), TransposeOfTranspose(), SliceOfInsertSlice(),
            InsertSliceTwice(),
        ])).rewrite_module(op)
