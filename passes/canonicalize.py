"""`array-canonicalize`: local simplifications of structural ops that hold for
every value (no float identity like x+0 -> x, which is wrong for -0.0)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
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
    """Reading back exactly the window just written yields what was written."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: A.SliceOp, rewriter: PatternRewriter) -> None:
        src = op.input.owner
        if (isinstance(src, A.InsertSliceOp) and src.start == op.start and src.step == op.step
                and same_type(src.source.type, op.result.type)):
            rewriter.replace(op, [], [src.source])


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
