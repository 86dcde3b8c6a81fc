"""`cover-products`: products of windows of the same two matrices, over the
same contraction, become one product over the windows' cover, each a
window of it. A loop that fills a triangle row by row — PolyBench's
covariance `d[:, i] @ d[:, i:]`, a symmetric rank-k update's
`A[:i + 1] @ A[i]` — is N matrix-vector products, each reading its window
of the matrix from memory; their cover is one matrix-matrix product
(`d.T @ d`), which BLAS runs near peak from cache-sized blocks.

    L_i = P[R_i, K]   R_i = Q[K, C_i]   (P, Q: a matrix or its transpose)
    L_i @ R_i  ->  G[R_i - r0, C_i - c0]   with  G = P[r0:r1, K] @ Q[K, c0:c1]

A window is a step-1 slice of a 2-D value or of its transpose, seen through
reshapes of a vector (`d[:, i]` captured as a (n, 1) slice reshaped to
(1, n) is row i of d.T). Products are grouped by their matrices (SSA
values: a matrix rewritten between two products is another value, so a
loop whose products read what earlier ones wrote — a triangular solve —
has nothing to group) and their contraction window; a group is covered
where it has two products or more and the cover computes at most
`MAX_WASTE` times their flops (a triangle: under 2). The cover reads only
the matrices, so it runs where the group's first product ran.

Each element of G is the dot product the original product computes, over
the same elements (the summation order is BLAS's, as numpy's own product
of another shape would have it). Elements outside the windows are computed
too: their floating-point flags are flags the program raises, and a flag
numpy acts on re-runs the call eagerly (numpy's warnings, numpy's values).
Runs first below the tensor level, for float32 and float64 (BLAS's types),
with static sizes."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import Float32Type, Float64Type, ModuleOp, TensorType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.transforms.dead_code_elimination import DeadCodeElimination

from dialects import array as A
from dialects.symbols import symbols_of

# the cover computes at most this many times the flops of the products it
# replaces (the upper or lower triangle of a square: (n + 1) / n times
# half, under 2)
MAX_WASTE = 2.0


@dataclass(frozen=True)
class Window:
    """base[r0:r0+h, c0:c0+w], base transposed first where `t`."""

    base: SSAValue
    t: bool
    r0: int
    c0: int
    h: int
    w: int

    def flipped(self) -> Window:
        return Window(self.base, not self.t, self.c0, self.r0, self.w, self.h)


def _vector(shape) -> bool:
    return sum(1 for d in shape if d != 1) <= 1


def window(v: SSAValue) -> Window:
    """v (2-D) as a window of a matrix: through step-1 slices, (1, 0)
    transposes, and reshapes of a vector that keep it a row or a column of
    a 2-D value (or flip one into the other); anything else is all of
    itself."""
    shape = tuple(v.type.get_shape())
    op = v.owner
    if isinstance(op, A.ReshapeOp) and _vector(shape):
        u = op.input
        while isinstance(u.owner, A.ReshapeOp) and _vector(u.type.get_shape()):
            u = u.owner.input
        ushape = tuple(u.type.get_shape())
        if len(ushape) == 2 and _vector(ushape) and ushape != (1, 1):
            if ushape == shape:
                return window(u)
            if ushape[::-1] == shape:
                return window(u).flipped()
    if isinstance(op, A.SliceOp) and len(op.input.type.get_shape()) == 2 \
            and all(s == 1 for s in A.ints(op.step)):
        inner = window(op.input)
        r, c = A.ints(op.start)
        return Window(inner.base, inner.t, inner.r0 + r, inner.c0 + c, shape[0], shape[1])
    if isinstance(op, A.TransposeOp) and A.ints(op.permutation) == (1, 0):
        return window(op.input).flipped()
    return Window(v, False, 0, 0, shape[0], shape[1])


def _eligible(op: Operation) -> bool:
    if not isinstance(op, A.DotOp):
        return False
    t = op.result.type
    return (isinstance(t, TensorType) and len(t.get_shape()) == 2
            and isinstance(t.element_type, (Float32Type, Float64Type))
            and not symbols_of([o.type for o in (*op.operands, *op.results)]))


def _view(block: Block, at: Operation, w: Window, r0: int, r1: int, c0: int, c1: int
          ) -> SSAValue:
    """base (transposed where w.t)[r0:r1, c0:c1], made before `at`."""
    v = w.base
    elem = v.type.element_type
    if w.t:
        rows, cols = v.type.get_shape()
        op = A.TransposeOp(v, (1, 0), TensorType(elem, [cols, rows]))
        block.insert_op_before(op, at)
        v = op.result
    rows, cols = v.type.get_shape()
    if (r0, r1, c0, c1) != (0, rows, 0, cols):
        op = A.SliceOp(v, [r0, c0], [1, 1], TensorType(elem, [r1 - r0, c1 - c0]))
        block.insert_op_before(op, at)
        v = op.result
    return v


def cover_block(block: Block) -> int:
    """Cover each group of products in `block`; the number of products
    replaced."""
    groups: dict[tuple, list[tuple[A.DotOp, Window, Window]]] = defaultdict(list)
    for op in block.ops:
        if not _eligible(op):
            continue
        lw, rw = window(op.lhs), window(op.rhs)
        k = lw.w
        key = (lw.base, lw.t, lw.c0, rw.base, rw.t, rw.r0, k, op.result.type.element_type)
        groups[key].append((op, lw, rw))
    replaced = 0
    for key, members in groups.items():
        if len(members) < 2:
            continue
        k = key[6]
        r0 = min(lw.r0 for _, lw, _ in members)
        r1 = max(lw.r0 + lw.h for _, lw, _ in members)
        c0 = min(rw.c0 for _, _, rw in members)
        c1 = max(rw.c0 + rw.w for _, _, rw in members)
        flops = sum(lw.h * rw.w for _, lw, rw in members) * k
        if (r1 - r0) * (c1 - c0) * k > MAX_WASTE * flops:
            continue
        first, lw, rw = members[0]  # (block order: the first product)
        lhs = _view(block, first, lw, r0, r1, lw.c0, lw.c0 + k)
        rhs = _view(block, first, rw, rw.r0, rw.r0 + k, c0, c1)
        elem = first.result.type.element_type
        cover = A.DotOp(lhs, rhs, TensorType(elem, [r1 - r0, c1 - c0]))
        block.insert_op_before(cover, first)
        for op, lw, rw in members:
            if (lw.r0, lw.h, rw.c0, rw.w) == (r0, r1 - r0, c0, c1 - c0):
                new = cover.result
            else:
                piece = A.SliceOp(cover.result, [lw.r0 - r0, rw.c0 - c0], [1, 1], op.result.type)
                block.insert_op_before(piece, op)
                new = piece.result
            op.result.replace_all_uses_with(new)
            block.erase_op(op)
            replaced += 1
    return replaced


@dataclass(frozen=True)
class CoverProducts(ModulePass):
    name = "cover-products"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        changed = False
        for f in op.walk():
            if isinstance(f, func.FuncOp) and f.body.blocks:
                changed |= cover_block(f.body.blocks[0]) > 0
        if changed:
            DeadCodeElimination().apply(ctx, op)  # the products' old views
