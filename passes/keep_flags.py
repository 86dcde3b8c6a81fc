"""`keep-flags`: numpy computes every element of every op a program writes,
used or not, and warns or raises on its floating-point exceptions as
`np.errstate` says; `z = x / y` left unused still says "divide by zero", and
so does `(x / y)[1]` where y[0] is 0. Dead-code elimination (xDSL's DCE,
CSE, the pattern rewriter, the forward/backward cut, the loop level's dead
stores) would drop an unused op and its flags with it; fusion computes a
value read in part (a slice or an index is an index map, a gather a load)
only where it is read. This pass runs first, on the captured function:
each op not computed in full — nothing reads it (a dead op), or its readers
read only part of it (`reads_whole`, `_covered`) — that can raise a
category of `categories` (`dialects.array.fp_flags`, from the op table's
`fpe` column) is read by one `array.flags` op, which has an effect, so
every later pass keeps it and what it reads. Only the last such op of a
chain is read (it computes in full those it reads in full). Below the
tensor level they are computed over all their elements in kernels that
store nothing (`loop.flags`): a dead value where it was, a value read in
part in a kernel of its own beside the kernels that read it.

`categories` are those the caller's errstate does not ignore when the
program is compiled (`lowering.pipeline.compile_segment`); an op of none of
them is dropped (computed in part) as before — but for one that can raise
an exception whatever the errstate (`dialects.array.raises_on_values`: an
integer power, whose negative exponent is numpy's ValueError; a numpy
routine, `np.linalg.inv` of a singular matrix), which is kept as one of
them, under every errstate. A program compiled so serves
a later call only while its errstate ignores the categories of those ops
(`dropped_categories`; the entry's guard `FlagsCheck`): under
`np.errstate(all="ignore")` they cost nothing. Ops of the backward of a
joint function (`bwd`) are the compiler's, not the user's, and are never
kept."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass

import numpy as np

from dialects import array as A
from dialects.symbols import always, same_shape, symbols_of
from dialects.ufuncs import FPE_CATEGORIES

from .autograd import BWD


def _elements(t: Attribute) -> int | None:
    """The number of elements of a tensor type (None: a size symbol)."""
    n = 1
    for d in t.get_shape() if isinstance(t, TensorType) else ():
        if type(d) is not int or d < 0:  # (a SymDim compared would record a relation)
            return None
        n *= d
    return n


def _empty(t: Attribute) -> bool:
    """Whether a tensor type surely has no elements (a static 0 dim)."""
    return isinstance(t, TensorType) and any(type(d) is int and d == 0 for d in t.get_shape())


def _nonempty(t: Attribute) -> bool:
    """Whether a tensor type has elements at every size: each dim a static
    positive int or a size expression positive for all sizes (`s0`,
    `s0*s1`, `s0 - 1`; not `s0 - 2`), asked without recording a guard."""
    return not isinstance(t, TensorType) or all(always(">", d, 0) for d in t.get_shape())


def _static(op: Operation, symbolic: bool = True) -> bool:
    """A slice or slice assignment whose window is known here: no size
    symbol in its offsets, steps or types (comparing one would record a
    relation, a guard on the call's sizes). `symbolic` False: the function
    has no size symbol at all (its arguments have none), nothing to look at."""
    if not symbolic:
        return True
    return not symbols_of([*op.properties.values(), *(v.type for v in (*op.operands, *op.results))])


# ops that read every element of each operand wherever every element of
# their results is computed (their operands of the results' shape, for the
# point-wise ones)
_POINTWISE = (A.UfuncOp, A.CompareOp, A.SelectOp, A.CastOp)
_WHOLE = (A.TransposeOp, A.ReshapeOp, A.BroadcastOp, A.ReduceOp, A.ArgReduceOp, A.ScanOp,
          A.DotOp, A.ConcatOp, A.PadOp)


def _same_shape(a: SSAValue, b: SSAValue) -> bool:
    return same_shape(a.type.get_shape(), b.type.get_shape())


def reads_whole(user: Operation, i: int, whole: set[SSAValue]) -> bool:
    """Whether `user` computes every element of its operand `i` where
    `whole` are the values computed in full: the results (a returned value),
    `array.flags` and a numpy routine (it gets whole arrays) always; an op
    of `_POINTWISE`/`_WHOLE`, a slice of all of it, a gather's indices, an
    assignment's new part, where its results are in `whole`. Anything else
    (a slice of a part, a gather's input, the destination of a slice
    assignment, an op not listed) reads it in part, as far as this knows
    (`_read_mask` knows more of slices, assignments and reshapes)."""
    if isinstance(user, (func.ReturnOp, A.FlagsOp, A.RoutineOp)):
        return True
    if isinstance(user, A.InsertSliceOp) and i == 0 and user.result not in whole:
        # the new part, where what reads the assignment covers its window
        # (`ret[w:] = ...; ret[w - 1:]`)
        box = _spans(user, user.source.type.get_shape()) if _static(user, True) and \
            _nonempty(user.source.type) else None
        return box is not None and _covered(user.result, whole, region=box)
    if not user.results or not all(r in whole for r in user.results):
        return False
    v = user.operands[i]
    if _empty(v.type):
        return True
    if not all(_nonempty(r.type) for r in user.results):
        return False  # (an empty result reads nothing; one that may be empty: not known here)
    if isinstance(user, A.SliceOp):
        return _same_shape(v, user.result)
    if isinstance(user, A.GatherOp):
        return v is user.indices
    if isinstance(user, A.InsertSliceOp):
        return v is user.source or _written_again(user)
    if isinstance(user, _POINTWISE) or user.name.startswith(("arith.", "math.")):
        return len(user.results) == 1 and _same_shape(v, user.results[0])
    return isinstance(user, _WHOLE)


def _written_again(op: A.InsertSliceOp) -> bool:
    """op writes into its destination what that has just been written
    (`x[w] -= y`: the view's store, then the assignment's): it reads all of
    it — the same array."""
    inner = op.dest.owner
    return (isinstance(inner, A.InsertSliceOp) and inner.source is op.source
            and inner.start == op.start and inner.step == op.step)


# values of at most this many elements get a mask of the elements read
# (`_read_mask`; one kept per value read in part, while the pass runs); a
# larger one is read in full or not, its slices' windows aside (`_covered`)
MASK_LIMIT = 1 << 14


def _window(op: A.SliceOp | A.InsertSliceOp, shape) -> tuple:
    """The index (numpy's `np.ix_`) of a slice's or an assignment's window."""
    n = op.result.type.get_shape() if isinstance(op, A.SliceOp) else op.source.type.get_shape()
    return np.ix_(*[b + t * np.arange(k) for b, t, k in zip(A.ints(op.start), A.ints(op.step), n)])


def _read_mask(v: SSAValue, read: dict, symbolic: bool = True) -> np.ndarray | None:
    """The elements of v (a value of at most `MASK_LIMIT`) that the slices,
    slice assignments (what of the destination they keep, their new part),
    reshapes and transposes of it read, where `read` (masks, or True:
    every element) says what of their results is read; None: none."""
    shape = tuple(v.type.get_shape())
    acc = np.zeros(shape, bool)
    for u in v.uses:
        op, got = u.operation, read.get(u.operation.results[0]) if u.operation.results else None
        if got is None or (isinstance(got, np.ndarray) and not got.any()) or not _static(
                op, symbolic):
            continue
        if isinstance(op, A.SliceOp):
            acc[_window(op, shape)] |= got
        elif isinstance(op, A.InsertSliceOp) and u.index == 1:  # what it keeps of its destination
            kept = np.ones(shape, bool) & got
            kept[_window(op, shape)] = False
            acc |= kept
        elif isinstance(op, A.InsertSliceOp):  # its new part, where read
            acc |= (np.ones(shape, bool) if got is True else got[_window(op, got.shape)]
                    .reshape(shape))
        elif isinstance(op, A.ReshapeOp):
            acc |= True if got is True else got.reshape(shape)
        elif isinstance(op, A.TransposeOp):
            acc |= True if got is True else got.transpose(np.argsort(A.ints(op.permutation)))
    return acc if acc.any() else None


# the most cells `_covered` marks (beyond: not covered, as far as it knows)
COVER_LIMIT = 1 << 16


def _spans(op: A.SliceOp | A.InsertSliceOp, sizes) -> list | None:
    """op's window as a box: per dim, the [lo, hi) spans it covers (a
    strided one, step by step); None: empty, or too many spans to mark."""
    box = []
    for b, t, n in zip(A.ints(op.start), A.ints(op.step), sizes):
        if n == 0:
            return None
        if n == 1 or abs(t) == 1:
            lo = min(b, b + (n - 1) * t)
            box.append([(lo, lo + n)])
        elif n > 64:  # (many strided windows: not worth marking)
            return None
        else:
            box.append([(b + k * t, b + k * t + 1) for k in range(n)])
    return box


def _covered(v: SSAValue, whole: set[SSAValue], symbolic: bool = True,
             region: list | None = None) -> bool:
    """Whether slices of v computed in full (in `whole`) and slice
    assignments into v (what they keep of it, all but their window)
    together read every element of v (of `region` of it, a box, where
    given): `z[1:] - z[:-1]`, `np.roll(z, 1)`, `y[k + 1:]` beside
    `y[k + 1:] += t`. Their windows are boxes; the union is marked on the
    grid of their edges along each dim."""
    shape = v.type.get_shape()
    if _elements(v.type) is None:
        return False
    boxes, holes = [], []
    for u in v.uses:
        s = u.operation
        if not _static(s, symbolic):
            continue
        if isinstance(s, A.SliceOp) and s.result in whole:
            box = _spans(s, s.result.type.get_shape())
            if box is not None:
                boxes.append(box)
        elif isinstance(s, A.InsertSliceOp) and u.index == 1 and s.result in whole:
            if 0 in s.source.type.get_shape():
                return True  # (an empty window: it keeps all of v)
            box = _spans(s, s.source.type.get_shape())
            if box is not None:
                holes.append(box)
    if not boxes and not holes:
        return False
    marked = boxes + holes + ([region] if region is not None else [])
    edges = [sorted({0, n, *(e for box in marked for a, b in box[d] for e in (a, b))})
             for d, n in enumerate(shape)]
    grid = [len(e) - 1 for e in edges]
    if int(np.prod(grid)) > COVER_LIMIT:
        return False

    def cells(box) -> np.ndarray:
        m = np.zeros(grid, bool)
        sel = [[i for i in range(grid[d]) if any(
            a <= edges[d][i] and edges[d][i + 1] <= b for a, b in spans)]
            for d, spans in enumerate(box)]
        m[np.ix_(*sel)] = True
        return m

    mask = np.zeros(grid, bool)
    for box in boxes:
        mask |= cells(box)
    for box in holes:  # what an assignment keeps: all but its window
        mask |= ~cells(box)
    return bool(mask.all() if region is None else mask[cells(region)].all())


def flag_ops(block: Block, categories) -> list[Operation]:
    """The ops to keep for their flags: each that can raise one of
    `categories` and is not computed in full (nothing reads it — a dead op
    —, or its readers read only part of it: a slice, an index, a gather, a
    reduction of a part, the destination of a slice assignment, a dead op
    read in part), but for those such an op kept computes in full (it reads
    all of them: the division under `np.log(x / y)[1:]`)."""
    return _walk(block, frozenset(categories))[0]


def _walk(block: Block, wanted: frozenset[str]) -> tuple[list[Operation], list[Operation]]:
    """(the ops kept for `wanted`, the ops not computed in full after all)."""
    symbolic = bool(symbols_of([a.type for a in block.args]))
    read: dict[SSAValue, np.ndarray | bool] = {}  # what of each value is computed: a mask, or all
    whole: set[SSAValue] = set()
    keep: list[Operation] = []
    partial: list[Operation] = []
    for op in reversed(list(block.ops)):
        for r in op.results:
            n = _elements(r.type)
            if any(reads_whole(u.operation, u.index, whole) for u in r.uses) or (
                    n is not None and n > MASK_LIMIT and _covered(r, whole, symbolic)):
                read[r] = True
            elif n is not None and n <= MASK_LIMIT:
                mask = _read_mask(r, read, symbolic)
                if mask is not None:
                    read[r] = True if mask.all() else mask
            if read.get(r) is True:
                whole.add(r)
        if all(r in whole for r in op.results):
            continue
        if BWD not in op.attributes and (A.fp_flags(op) & wanted or A.raises_on_values(op)):
            keep.append(op)
            whole.update(op.results)
            read.update((r, True) for r in op.results)
        else:
            partial.append(op)
    return keep[::-1], partial[::-1]


def dropped_categories(module: ModuleOp, categories) -> frozenset[str]:
    """The categories of the ops a program compiled for `categories` does
    not compute in full (those of no category it keeps): a call whose
    errstate acts on one of them needs another program."""
    kept = frozenset(categories)
    out: set[str] = set()
    for f in module.ops:
        if isinstance(f, func.FuncOp) and f.body.blocks:
            for op in _walk(f.body.blocks[0], kept)[1]:
                if BWD not in op.attributes:
                    out |= A.fp_flags(op) - kept
    return frozenset(out)


@dataclass(frozen=True)
class KeepFlags(ModulePass):
    """`xdsl-opt -p 'keep-flags{categories=divide,over,invalid}'` (numpy's
    default errstate acts on those three)."""

    name = "keep-flags"
    categories: tuple[str, ...] = ("divide", "over", "invalid")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        unknown = set(self.categories) - set(FPE_CATEGORIES)
        if unknown:
            raise ValueError(f"keep-flags: unknown categories {sorted(unknown)} (known: "
                             f"{', '.join(FPE_CATEGORIES)})")
        for f in [o for o in op.ops if isinstance(o, func.FuncOp)]:
            if not f.body.blocks:
                continue
            block = f.body.blocks[0]
            keep = flag_ops(block, self.categories)
            if keep:
                block.insert_op_before(A.FlagsOp([r for op in keep for r in op.results]),
                                       block.last_op)
