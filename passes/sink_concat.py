"""`sink-concat`: an element-wise op over a concatenation becomes the
concatenation of that op over its pieces (each other operand sliced to the
piece's window), so that `u - c * (np.roll(h, -1, axis=1) - h)` is one
fused kernel per piece writing its window of the result instead of a
kernel per piece of the roll, a buffer for it, and a kernel reading it.

    f(concat(a, b, axis), y) -> concat(f(a, y[..:n_a..]), f(b, y[n_a:..]), axis)

Repeated, a chain of element-wise ops over rolls along two axes ends as one
concatenation of (at most `MAX_PIECES`) fused windows — nested where the
axes differ, which lower-to-loop writes into one buffer at the pieces'
offsets. It splits only where no value is computed twice: the
concatenation is read by this op alone, or each of its pieces is a view
(a window of a value read where it lies). Runs below the tensor level
(first of the passes of a backend that generates kernels): a concatenation
the backend leaves to numpy (float16 on the CPU, complex, sizes known only
at run time) is left whole."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import BFloat16Type, ComplexType, Float16Type, ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern
from xdsl.transforms.dead_code_elimination import DeadCodeElimination

from dialects import array as A
from dialects.symbols import symbols_of

# a concatenation made by splitting has at most this many pieces (counted
# through nested ones): each is a kernel
MAX_PIECES = 8

_ELEMENTWISE = (A.UfuncOp, A.CompareOp, A.SelectOp, A.CastOp)
_VIEWS = (A.SliceOp, A.BroadcastOp, A.TransposeOp, A.ReshapeOp)


def elementwise(op: Operation) -> bool:
    """One result computed element by element from operands of its shape."""
    if not (op.name.startswith(("arith.", "math.")) or isinstance(op, _ELEMENTWISE)):
        return False
    if len(op.results) != 1 or not op.operands or op.regions:
        return False
    t = op.results[0].type
    return isinstance(t, TensorType) and all(
        isinstance(o.type, TensorType) and o.type.get_shape() == t.get_shape()
        for o in op.operands)


def in_kernels(t: TensorType, half_kernels: bool) -> bool:
    """A value of type t a concatenation of which the backend writes piece
    by piece (lower_to_loop.concat_in_kernels)."""
    e = t.element_type
    return (not isinstance(e, ComplexType)
            and (half_kernels or not isinstance(e, (Float16Type, BFloat16Type)))
            and not symbols_of([t]))


def pieces(v: SSAValue) -> int:
    """The kernels a window of v splits into: v's pieces, counted through
    nested concatenations, where v is a concatenation read only here (a
    window of one read elsewhere too is a slice of its buffer)."""
    op = v.owner
    if isinstance(op, A.ConcatOp) and v.has_one_use():
        return sum(pieces(p) for p in op.inputs)
    return 1


def _viewed(v: SSAValue) -> bool:
    """v is a view (a chain of views ending at anything)."""
    return isinstance(v.owner, _VIEWS)


def _read_where_it_lies(v: SSAValue) -> bool:
    """v, through views, is a value lower-to-loop never computes again
    where it is read: an argument, a constant, or one of an op that is not
    element-wise (a concatenation, a reduction, a product: each in its own
    kernels, read from its buffer). A view of an element-wise value read
    elsewhere too would be computed again in each window (`exp(h)` of
    `np.roll(g, 1) + np.roll(g, -1) + g`), where a concatenation of it
    makes it once."""
    while isinstance(v.owner, _VIEWS):
        v = v.owner.operands[0]
    op = v.owner
    return not isinstance(op, Operation) or isinstance(op, (A.ConstantOp, A.IotaOp)) or not (
        op.name.startswith(("arith.", "math.")) or isinstance(op, _ELEMENTWISE))


def _splittable(cat: A.ConcatOp) -> bool:
    """Splitting an op over `cat` computes nothing twice: each piece is a
    view of a value read where it lies, or (where the op alone reads
    `cat`) a value this piece alone reads, its expression moved into the
    op's window."""
    only_here = cat.result.has_one_use()
    return all(_read_where_it_lies(p) if _viewed(p) else (only_here and p.has_one_use())
               for p in cat.inputs)


def _shape_with(t: TensorType, axis: int, n: int) -> TensorType:
    shape = list(t.get_shape())
    shape[axis] = n
    return TensorType(t.element_type, shape)


class _Splitter:
    def __init__(self, rewriter: PatternRewriter, anchor: Operation):
        self.rewriter, self.anchor = rewriter, anchor

    def _new(self, op: Operation) -> SSAValue:
        self.rewriter.insert(op)  # before the op being rewritten
        return op.results[0]

    def window(self, x: SSAValue, axis: int, lo: int, hi: int) -> SSAValue:
        """x[..., lo:hi, ...] along `axis`: a piece of a concatenation
        where the window lies in one, a concatenation of windows of pieces
        where x is one read only here, a broadcast of a window of its
        input, one slice of a slice, otherwise a slice."""
        t = x.type
        shape = t.get_shape()
        if lo == 0 and hi == shape[axis]:
            return x
        op = x.owner
        one_use = x.has_one_use()
        if isinstance(op, A.ConcatOp):
            cat = op.axis.value.data
            if cat == axis:
                off, parts = 0, []
                for p in op.inputs:
                    n = p.type.get_shape()[axis]
                    a, b = max(lo, off), min(hi, off + n)
                    if a < b:
                        parts.append((p, a - off, b - off))
                    off += n
                if len(parts) == 1:  # inside one piece: read it, the concatenation unneeded here
                    p, a, b = parts[0]
                    if one_use or _viewed(p):
                        return self.window(p, axis, a, b)
                elif one_use:
                    ins = [self.window(p, axis, a, b) for p, a, b in parts]
                    return self._new(A.ConcatOp(ins, axis, _shape_with(t, axis, hi - lo)))
            elif one_use:
                ins = [self.window(p, axis, lo, hi) for p in op.inputs]
                return self._new(A.ConcatOp(ins, cat, _shape_with(t, axis, hi - lo)))
        if isinstance(op, A.BroadcastOp):
            src = op.input.type.get_shape()
            d = axis - (len(shape) - len(src))
            inner = op.input if d < 0 or src[d] == 1 else self.window(op.input, d, lo, hi)
            return self._new(A.BroadcastOp(inner, _shape_with(t, axis, hi - lo)))
        start, step = [0] * len(shape), [1] * len(shape)
        start[axis] = lo
        if isinstance(op, A.SliceOp):  # one slice of the slice's input
            s0, st = list(A.ints(op.start)), list(A.ints(op.step))
            s0[axis] += st[axis] * lo
            return self._new(A.SliceOp(op.input, s0, st, _shape_with(t, axis, hi - lo)))
        return self._new(A.SliceOp(x, start, step, _shape_with(t, axis, hi - lo)))

    def split(self, op: Operation, cat: A.ConcatOp) -> Operation:
        axis = cat.axis.value.data
        t = op.results[0].type
        outs, off = [], 0
        for p in cat.inputs:
            n = p.type.get_shape()[axis]
            if n:
                ins = [self.window(o, axis, off, off + n) for o in op.operands]
                new = type(op).create(operands=ins, result_types=[_shape_with(t, axis, n)],
                                      properties=dict(op.properties),
                                      attributes=dict(op.attributes), location=op.location)
                outs.append(self._new(new))
            off += n
        return A.ConcatOp(outs, axis, t)


@dataclass
class SinkConcatPattern(RewritePattern):
    half_kernels: bool

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not elementwise(op) or not in_kernels(op.results[0].type, self.half_kernels):
            return
        for o in op.operands:
            cat = o.owner
            if not (isinstance(cat, A.ConcatOp) and in_kernels(o.type, self.half_kernels)):
                continue
            if not _splittable(cat):
                continue
            if sum(1 for p in cat.inputs if p.type.get_shape()[cat.axis.value.data]) < 2:
                continue
            # the pieces the result would have: this concatenation's, times
            # those the other operands' windows split into
            n = sum(pieces(p) for p in cat.inputs)
            if n * max((pieces(x) for x in op.operands if x is not o), default=1) > MAX_PIECES:
                continue
            old = list(op.operands)
            rewriter.replace(op, _Splitter(rewriter, op).split(op, cat))
            _drop_unused(rewriter, old)
            return


def _drop_unused(rewriter: PatternRewriter, values: list[SSAValue]) -> None:
    """Erase the concatenations and views among `values` (and theirs) that
    nothing reads any more, so that the pieces they held count one use."""
    while values:
        v = values.pop()
        op = v.owner
        if isinstance(op, (A.ConcatOp, *_VIEWS)) and op.parent is not None and \
                not any(r.uses for r in op.results):
            values.extend(op.operands)
            rewriter.erase(op)


@dataclass(frozen=True)
class SinkConcat(ModulePass):
    """`half_kernels`: the backend's kernels compute float16/bfloat16 (the
    GPU's), so a concatenation of them is written piece by piece too."""

    name = "sink-concat"
    half_kernels: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(SinkConcatPattern(self.half_kernels)).rewrite_module(op)
        DeadCodeElimination().apply(ctx, op)  # the concatenations split away
