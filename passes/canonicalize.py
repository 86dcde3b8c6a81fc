"""`array-canonicalize`: local simplifications of structural ops that hold for
every value (no float identity like x+0 -> x, which is wrong for -0.0)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint
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


def window_box(op: A.SliceOp | A.InsertSliceOp, shape) -> list[tuple[int, int]] | None:
    """The [lo, hi) per dim of a step-1 window of static size, else None."""
    if any(st != 1 for st in A.ints(op.step)) or any(type(d) is not int for d in shape):
        return None
    return [(lo, lo + n) for lo, n in zip(A.ints(op.start), shape)]


def _inside(a, b) -> bool:
    return all(blo <= alo and ahi <= bhi for (alo, ahi), (blo, bhi) in zip(a, b))


def apart(a, b) -> bool:
    """Two boxes share no element."""
    return any(ahi <= blo or bhi <= alo for (alo, ahi), (blo, bhi) in zip(a, b))


class ReadInsideWindow(RewritePattern):
    """A part of the window just written, read where nothing else reads the
    array there (the next assignment overwrites it, other reads are apart),
    is read from the value written, and the assignment writes only the rest
    of its window: `y[k:] += t_k` in a loop over k (an FIR filter's taps)
    becomes one fused expression of every tap over y[K:] and one element
    per tap, instead of a pass over y per tap. Each element of the value
    is computed once — in the assignment or in the reader — and the rest
    of the window must be a box (the read a prefix or suffix of it along
    one axis)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: A.SliceOp, rewriter: PatternRewriter) -> None:
        ins = op.input.owner
        if not isinstance(ins, A.InsertSliceOp):
            return
        w = window_box(ins, ins.source.type.get_shape())
        s = window_box(op, op.result.type.get_shape())
        if w is None or s is None or s == w or not _inside(s, w):
            return
        diff = [d for d, (a, b) in enumerate(zip(s, w)) if a != b]
        if len(diff) != 1:
            return
        d = diff[0]
        (slo, shi), (wlo, whi) = s[d], w[d]
        if slo != wlo and shi != whi:  # the rest would be two pieces
            return
        for u in ins.result.uses:
            user = u.operation
            if user is op:
                continue
            if isinstance(user, A.InsertSliceOp) and u.index == 1:
                uw = window_box(user, user.source.type.get_shape())
                if uw is not None and _inside(s, uw):
                    continue
            if isinstance(user, A.SliceOp):
                uw = window_box(user, user.result.type.get_shape())
                if uw is not None and apart(uw, s):
                    continue
            return
        v = ins.source
        vt = v.type
        elem = vt.element_type
        rel = [lo - wl for (lo, _), (wl, _) in zip(s, w)]
        read = A.SliceOp(v, rel, [1] * len(w), op.result.type)
        rest_lo, rest_hi = (shi, whi) if slo == wlo else (wlo, slo)
        rest_shape = [hi - lo for lo, hi in w]
        rest_shape[d] = rest_hi - rest_lo
        rest_rel = [0] * len(w)
        rest_rel[d] = rest_lo - wlo
        rest = A.SliceOp(v, rest_rel, [1] * len(w), TensorType(elem, rest_shape))
        start = [lo for lo, _ in w]
        start[d] = rest_lo
        new_ins = A.InsertSliceOp(rest.result, ins.dest, start, [1] * len(w))
        rewriter.insert(read, InsertPoint.before(op))
        rewriter.replace(op, [], [read.result])
        rewriter.insert([rest, new_ins], InsertPoint.before(ins))
        rewriter.replace(ins, [], [new_ins.result])


class SliceAcrossWindow(RewritePattern):
    """A slice of a slice assignment read by nothing else, reaching across
    the edge of its window along one axis, is the concatenation of the
    parts it reads of the destination and of the value written: the
    assignment's array is never made (`ret[w:] = ret[w:] - ret[:-w]; return
    ret[w - 1:] / w`, a moving average: the division runs over the pieces,
    one pass, `sink-concat`)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: A.SliceOp, rewriter: PatternRewriter) -> None:
        ins = op.input.owner
        if not isinstance(ins, A.InsertSliceOp) or not ins.result.has_one_use():
            return
        w = window_box(ins, ins.source.type.get_shape())
        s = window_box(op, op.result.type.get_shape())
        if w is None or s is None or _inside(s, w) or apart(s, w):
            return
        diff = [d for d, (a, b) in enumerate(zip(s, w)) if not (b[0] <= a[0] and a[1] <= b[1])]
        if len(diff) != 1:  # (inside the window along every other axis)
            return
        d = diff[0]
        (slo, shi), (wlo, whi) = s[d], w[d]
        elem = op.result.type.element_type
        parts: list[tuple[SSAValue, int, int, int]] = []  # (value, offset of its box, lo, hi)
        if slo < wlo:
            parts.append((ins.dest, 0, slo, wlo))
        parts.append((ins.source, wlo, max(slo, wlo), min(shi, whi)))
        if shi > whi:
            parts.append((ins.dest, 0, whi, shi))
        new_ops, pieces = [], []
        for v, base, lo, hi in parts:
            start = [a - (wl if v is ins.source else 0) for (a, _), (wl, _) in zip(s, w)]
            start[d] = lo - base
            shape = [b - a for a, b in s]
            shape[d] = hi - lo
            if all(a == 0 for a in start) and shape == list(v.type.get_shape()):
                pieces.append(v)  # (all of it)
                continue
            piece = A.SliceOp(v, start, [1] * len(s), TensorType(elem, shape))
            new_ops.append(piece)
            pieces.append(piece.result)
        cat = A.ConcatOp(pieces, d, op.result.type)
        rewriter.replace(op, [*new_ops, cat], [cat.result])


def _same_value(a: SSAValue, b: SSAValue) -> bool:
    """a and b hold the same array: one value, or two reshapes of one value
    to one type."""
    if a is b:
        return True
    ra, rb = a.owner, b.owner
    return (isinstance(ra, A.ReshapeOp) and isinstance(rb, A.ReshapeOp)
            and ra.input is rb.input and a.type == b.type)


class InsertSliceTwice(RewritePattern):
    """Writing a window again with what it already holds changes nothing:
    `x[w] -= y` stores its result through the view and again by the
    assignment (the same source, the same window, twice; the source may be
    reshaped to the window's shape once for each write: `A[1:, k] /= d`
    reshapes the quotient for the view and again for the assignment)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: A.InsertSliceOp, rewriter: PatternRewriter) -> None:
        inner = op.dest.owner
        if (isinstance(inner, A.InsertSliceOp) and _same_value(inner.source, op.source)
                and inner.start == op.start and inner.step == op.step):
            rewriter.replace(op, [], [inner.result])


@dataclass(frozen=True)
class ArrayCanonicalize(ModulePass):
    name = "array-canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GreedyRewritePatternApplier([
            FoldIdentity(), ReshapeOfReshape(), TransposeOfTranspose(), SliceOfInsertSlice(),
            ReadInsideWindow(), SliceAcrossWindow(),
            InsertSliceTwice(),
        ])).rewrite_module(op)
