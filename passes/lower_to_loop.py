"""`lower-to-loop`: the tensor level becomes the loop level, fusing as it goes.

Every tensor value is either *realized* (it gets a buffer: graph inputs and
outputs, operands and results of externs, reductions that cannot be fused
into their consumer, and expensive pointwise values used more than once) or
*inlined*: computed on the fly, at the index its consumer asks for, inside
the consumer's kernel. Views (broadcast, transpose, slice, reshape) only
transform the index. A realized value is computed by one `loop.kernel`:

* its domain is the value's shape, split into parallel dims P (a prefix) and
  inner dims;
* reductions it needs whose result is indexed exactly by P are computed per
  point of P as `loop.reduce` ops at the top of the kernel (a reduction with
  its pointwise prologue and epilogue over the same rows is one kernel:
  LayerNorm, softmax, RMSNorm);
* the pointwise body runs in a `loop.map` over the inner dims and stores.

A gather (`take`, fancy indexing) is a load at a data-dependent index: the
index value, checked and normalized by `loop.index`, is one more index of the
load; a scatter and a scan (`cumsum`) are kernels whose points run in order.
Ops the loop level does not generate become `loop.extern` calls (matmul goes
to BLAS; concat/pad run in numpy for now; an `array.routine` is its numpy
routine, one extern for all of its results, named `numpy:np.linalg.svd`).

A slice assignment (`array.insert_slice`) into a value nothing else reads —
the program's own array, filled row by row (`out = np.zeros(...)`,
`out[i] = f(x[i])`) — is done in place: its result takes the destination's
buffer and one kernel computes the source, fused, and stores it into the
window (destination-passing, as MLIR's one-shot bufferization does). Any
other slice assignment copies: the destination is read again later, or is
the caller's array, kept pristine for an eager re-run — unless no op of the
program can make one (`Lowering.own_args`). A result written back into the
caller's array (`x *= y`) is computed in the array's own buffer where its
kernel reads it point for point (`Lowering.in_place_result`), keeping the old
values in an undo buffer where a re-run may need them.
Every kernel records the tensor ops fused into it and every refused fusion
leaves a reason (`LoweringReport`), which `explain` shows."""

from __future__ import annotations

import re

from collections import Counter
from contextvars import ContextVar
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, func, math, memref
from xdsl.dialects.builtin import (
    ArrayAttr,
    ComplexType,
    DictionaryAttr,
    FunctionType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneAttr,
    Signedness,
    StridedLayoutAttr,
    StringAttr,
    Float32Type,
    Float64Type,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import (AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr,
                             AffineDimExpr, AffineExpr, AffineMap)
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

import numpy as np

from dialects import array as A
from dialects.dtypes import from_ir
from dialects import loop as L
from dialects import ufuncs as U
from dialects.symbols import SymDim, hint, symbols_of
from passes import cost_model as cm
from passes.schedule import STREAM_BYTES

# ufuncs (by numpy name) that the loop level generates for some loops (the
# table's `gen` column; "float": not for integer loops); others run through an
# extern
GENERATED_UFUNCS = frozenset(U.names(lambda u: u.generated))

# relative cost of computing a value again instead of storing it: 8 for an op
# whose ufunc (`array.ufunc` by name, an upstream op by decompose's rewrites)
# the table's `recompute` column calls expensive, 1 for other ops, 0 for views
# and constants (a scalar the kernel holds)
RECOMPUTE_EXPENSIVE = 8
RECOMPUTE_LIMIT = 12

_ELEMENTWISE_DIALECTS = ("arith.", "math.")


def scalar_type(t):
    return t.element_type


def memref_of(t: TensorType, layout: str = "C") -> MemRefType:
    """The buffer of a value of type `t` laid out as `layout` ("C", "F",
    "strided"). An F-contiguous argument's element strides follow from its
    shape (1, n0, n0*n1, ...: static up to the first dynamic size; a size-1
    dim's stride, which numpy leaves free, is never used to address an
    element); a strided one's are read from the array."""
    if layout == "C":
        return MemRefType(t.element_type, t.get_shape())
    shape = t.get_shape()
    strides: list = [NoneAttr()] * len(shape)
    if layout == "F":
        acc: int | None = 1
        for d, n in enumerate(shape):
            strides[d] = NoneAttr() if acc is None else acc
            acc = None if acc is None or n == A.DYN else acc * max(n, 1)
    return MemRefType(t.element_type, shape, StridedLayoutAttr(strides, 0))


def is_elementwise(op: Operation) -> bool:
    return op.name.startswith(_ELEMENTWISE_DIALECTS) or isinstance(
        op, (A.UfuncOp, A.CompareOp, A.SelectOp, A.CastOp, A.ConstantOp, A.IotaOp))


def is_view(op: Operation) -> bool:
    return isinstance(op, (A.BroadcastOp, A.TransposeOp, A.SliceOp, A.ReshapeOp))


# whether the function being lowered is for a backend whose kernels compute
# float16 and bfloat16 values (LowerToLoop.half_kernels: the GPU's Triton)
_HALF_KERNELS: ContextVar[bool] = ContextVar("half_kernels", default=False)


def _half(v: SSAValue) -> bool:
    """A float16 or bfloat16 value that generated code does not hold (the
    CPU's: numpy computes it, an extern)."""
    return not _HALF_KERNELS.get() and _is_half(getattr(v.type, "element_type", None))


def _is_half(t) -> bool:
    """Whether element type `t` is float16 or bfloat16."""
    from xdsl.dialects.builtin import BFloat16Type, Float16Type

    return isinstance(t, (Float16Type, BFloat16Type))


# (threads, parallel threshold) of the CPU, whose numpy loops the cost model
# may choose over a generated pointwise op (`LowerToLoop.numpy_loops`); None:
# a backend whose kernels compute every generated op (the GPU's)
_NUMPY_LOOPS: ContextVar[tuple[int, int] | None] = ContextVar("numpy_loops", default=None)


def generated(op: Operation) -> bool:
    """Can the loop level compute this op inline?"""
    if any(_half(v) for v in (*op.operands, *op.results)):
        # float16 converts through compiler-rt routines (__truncdfhf2, ...) that
        # a JIT process may not have: numpy runs float16 ops (an extern)
        return False
    if _power(op) and shape_class(op) == "power":  # (the cost model's: float pow only)
        return path_choice(op).path == "generated"
    if isinstance(op, A.UfuncOp):
        u = U.UFUNCS.get(op.fn.data)
        if u is None:
            return False
        if u.gen == "float" and isinstance(op.inputs[0].type.element_type, IntegerType):
            return False  # numpy raises for negative integer powers; 1/0 rules
        return u.generated
    if isinstance(op, A.ConstantOp):
        return not op.value.data.startswith("bytes:")
    if isinstance(op, A.ReduceOp) and column_reduction(op):
        return accumulated(op)
    if isinstance(op, (A.ReduceOp, A.ArgReduceOp)):
        return True
    if isinstance(op, A.DotOp):
        return short_dot(op) or narrow_dot(op)
    if isinstance(op, (A.GatherOp, A.ScatterOp)):
        return gathered(op)
    if isinstance(op, A.ScanOp):
        return True
    return is_elementwise(op) or is_view(op)


def gathered(op: A.GatherOp | A.ScatterOp) -> bool:
    """`take` along an axis is a load at a data-dependent index (`loop.index`,
    checked: an index out of range is an IndexError of the call), a scatter
    (`dest[..., idx] = u`, `np.add.at`) a kernel storing at one
    (`ScatterEmitter`). numpy keeps uint64 indices (above 2**63 they do not
    fit the kernels' i64) and an empty indexed axis (where no index is valid,
    and no access is possible to fall back on)."""
    t = op.indices.type.element_type
    src = op.input if isinstance(op, A.GatherOp) else op.dest
    covered = op.result if isinstance(op, A.GatherOp) else op.updates
    return not ((t.width.data == 64 and t.signedness.data == Signedness.UNSIGNED)
                or src.type.get_shape()[op.axis.value.data] == 0
                # every index is checked where it is used: numpy checks them
                # even where no element is read (x[:, i] of an empty x)
                or (_size(covered) == 0 and _size(op.indices) > 0))


def _size(v: SSAValue) -> int:
    n = 1
    for d in v.type.get_shape():
        n *= d
    return n


SHORT_K = 16  # a matmul contracting this few or fewer may be generated, not BLAS


def _float_matmul(op: A.DotOp) -> bool:
    return (len(op.lhs.type.get_shape()) == 2 and len(op.rhs.type.get_shape()) == 2
            and isinstance(op.result.type.element_type, (Float32Type, Float64Type)))


def short_dot(op: A.DotOp) -> bool:
    """A float matmul (M, K) x (K, N) with K <= SHORT_K, where the cost
    model prefers it generated (`matmul-short`; the MLP backward's
    `dlogits @ W2.T`, K = number of classes): BLAS spends 50-130 us on its
    1 MiB output here and the next kernel reads it back; generated, each
    output element is K products summed in order, fused into its consumer
    (`KernelEmitter._value_at`)."""
    return _short_shape(op) and path_choice(op).path == "generated"


NARROW_N = 16  # a matmul into this few columns may be generated, over a longer contraction than SHORT_K


def narrow_dot(op: A.DotOp) -> bool:
    """A float matmul (M, K) x (K, N) into N <= NARROW_N columns with a long
    contraction, where the cost model prefers it generated (`matmul-narrow`;
    the MLP's `h @ W2`, N = number of classes): one kernel over the rows,
    the N dot products of a row in one pass over it (`DotEmitter`), fused
    multiply-adds in vector accumulators. BLAS spends ~110 us on the MLP's
    256 x 1024 x 10 product with cold caches, most of it reading h back;
    generated, it joins the kernel that writes h (`merge_rows`). A few rows
    (a vector times a matrix: `data[:, i] @ data[:, i+1:]`) are BLAS's: one
    call reads the matrix as fast, and a kernel per column count would be
    compiled for nothing — as the cost table says."""
    return _narrow_shape(op) and path_choice(op).path == "generated"


def _short_shape(op: A.DotOp) -> bool:
    a = op.lhs.type.get_shape()
    # (a symbolic K: BLAS, unguarded; the other sizes decide by their hints)
    return _float_matmul(op) and not isinstance(a[1], SymDim) and 1 <= a[1] <= SHORT_K


def _narrow_shape(op: A.DotOp) -> bool:
    a, b = op.lhs.type.get_shape(), op.rhs.type.get_shape()
    # (a symbolic N: BLAS, unguarded — the kernel's structure is per column)
    return (_float_matmul(op) and not isinstance(b[1], SymDim) and 1 <= b[1] <= NARROW_N
            and hint(a[1]) > SHORT_K
            # A's rows must be rows in memory (`h.T @ dlogits` reads columns,
            # so would a product of an F-ordered argument: BLAS reads both
            # as they lie, transposed)
            and not blas_operand(op.lhs)[1] and _argument_layout(op.lhs) != "F")


def _argument_layout(v: SSAValue) -> str | None:
    """The layout class (`AnnotateLayouts`) of the argument v is a slice of,
    or None where v is not one."""
    while isinstance(v.owner, A.SliceOp):
        v = v.owner.operands[0]
    return _layout_of_argument(v) if isinstance(v, BlockArgument) else None


def _power(op: Operation) -> bool:
    """`x ** y`: the ufunc, or the op decompose makes of it."""
    return op.name == "math.powf" or isinstance(op, A.UfuncOp) and op.fn.data == "power"


def shape_class(op: Operation) -> str | None:
    """The cost model's class of an op that both a generated kernel and a
    library routine can compute (`passes/cost_model.py`), else None."""
    if isinstance(op, A.DotOp):
        if _short_shape(op):
            return "matmul-short"
        if _narrow_shape(op):
            return "matmul-narrow"
    elif isinstance(op, A.ReduceOp) and awkward_reduction(op) and not accumulated(op):
        return "column-any" if op.kind.data in ("any", "all") else "column-reduction"
    elif (_power(op) and _NUMPY_LOOPS.get() and str(op.results[0].type.element_type) in ("f32", "f64")
          and all(o.type.element_type == op.results[0].type.element_type for o in op.operands)):
        return "power"
    return None


def _nbytes(v: SSAValue) -> int:
    n = from_ir(v.type.element_type).itemsize
    for d in v.type.get_shape():
        n *= hint(d)
    return n


def _made_by_kernel(v: SSAValue) -> bool:
    """v comes from a generated elementwise op of the function (the kernel
    computing it can feed a row-wise consumer without a read back)."""
    op = v.owner
    return isinstance(op, Operation) and is_elementwise(op) and generated(op)


def _inlined_by_users(v: SSAValue) -> bool:
    """Every user of v computes it at its own points (a generated
    elementwise op): v is never stored."""
    users = [u.operation for u in v.uses]
    return bool(users) and all(is_elementwise(u) and generated(u) for u in users)


def work_of(op: Operation, shape_class: str) -> cm.Work:
    """The work each path of op's class does, as `cost_model` counts it (and
    `lowering.calibrate` counts it for the programs it times)."""
    if shape_class in ("column-reduction", "column-any"):
        n, out = _nbytes(op.input), _nbytes(op.result)
        shape = [hint(d) for d in op.input.type.get_shape()]
        elems = int(np.prod(shape))
        return cm.Work(n + out, n + out, elems, elems // max(1, shape[-1]))
    if shape_class == "power":
        threads, threshold = _NUMPY_LOOPS.get() or (1, 1)
        return power_work(int(np.prod([hint(d) for d in op.results[0].type.get_shape()])),
                          from_ir(op.results[0].type.element_type).itemsize,
                          sum(1 for o in op.operands if _made_by_kernel(o)
                              and o.type.get_shape() == op.results[0].type.get_shape()),
                          _inlined_by_users(op.results[0]), threads, threshold)
    (m, k), n = map(hint, op.lhs.type.get_shape()), hint(op.rhs.type.get_shape()[1])
    s = from_ir(op.result.type.element_type).itemsize
    return matmul_work(shape_class, m, k, n, s, _inlined_by_users(op.result),
                       _made_by_kernel(op.lhs), sum(1 for _ in op.lhs.uses) > 1)


def matmul_work(shape_class: str, m: int, k: int, n: int, itemsize: int, out_inlined: bool,
                lhs_made_by_kernel: bool, lhs_used_elsewhere: bool) -> cm.Work:
    """(M, K) @ (K, N): a short product inlined into its consumers never
    stores its output, which BLAS writes and the consumer reads back; a
    narrow product whose A comes from the kernel computing it reads it
    there, where BLAS needs it stored (a write, unless stored anyway for
    another use) and reads it back. Each such context is a variant of the
    class, with rates of its own (fresh intermediates page-fault: their
    bytes cost more than the model's one rate per byte says)."""
    a, b, c = m * k * itemsize, k * n * itemsize, m * n * itemsize
    flops = 2 * m * k * n
    if shape_class == "matmul-short":
        if out_inlined:
            return cm.Work(a + b, a + b + 2 * c, flops, m, "fused")
        return cm.Work(a + b + c, a + b + c, flops, m)
    if not lhs_made_by_kernel:
        return cm.Work(a + b + c, a + b + c, flops, m)
    if lhs_used_elsewhere:
        return cm.Work(a + b + c, 2 * a + b + c, flops, m, "fused-kept")
    return cm.Work(a + b + c, 3 * a + b + c, flops, m, "fused")


def power_work(n: int, itemsize: int, made: int, inlined: bool, threads: int,
               threshold: int) -> cm.Work:
    """x ** y into n elements: either path reads its operands and writes
    the result; numpy's loop also reads back each operand a kernel made for
    it (`made`: written, then read) and writes the result a generated
    consumer would have computed inline (`inlined`: then read back). The
    generated kernel splits its elements over the threads from `threshold`
    on (`parallel_threads`), numpy's loop runs on one."""
    nbytes = 2 * n * itemsize
    extra = 2 * n * itemsize * (made + int(inlined))
    per_thread = n / (max(1, min(threads, n)) if n >= threshold else 1)
    return cm.Work(nbytes, nbytes + extra, n, 1, "float32" if itemsize == 4 else "float64",
                   generated_flops=per_thread)


def path_choice(op: Operation) -> cm.Choice:
    """The cost model's path for an op of a shape class."""
    cls = shape_class(op)
    assert cls is not None, op.name
    return cm.choose(cls, work_of(op, cls))


# ---- products sharing one pass over a matrix's rows ---------------------------
# `A.T @ v` (or `v @ A`) sums A's rows, row i scaled by v[i]; where v[i] is
# computed from products of A's row i (`A @ W`: logistic regression's
# `X.T @ (sigmoid(X @ w) - y)`, atax's `A.T @ (A @ x)`), one ordered kernel over
# A's rows computes both (`SharedRowsEmitter`): BLAS reads A once per product.

def rows_contracted(op: Operation) -> tuple[SSAValue, SSAValue, int] | None:
    """(A, the other operand, the axis of the other operand that runs along
    A's rows) of a float matrix-vector product that contracts over the rows
    of a matrix A (M, K) laid out by rows: `A.T @ v` (v (M, 1): axis 0) or
    `v @ A` (v (1, M): axis 1), M > SHORT_K, 8 <= K, a row of at most
    SHARED_ROW_BYTES, static sizes; else None. (Into N > 1 columns, the pass
    would add each row into N interleaved outputs, strided: BLAS's gemm.)"""
    if not isinstance(op, A.DotOp) or not _float_matmul(op) or symbols_of(
            [op.lhs.type, op.rhs.type]):
        return None
    el = op.result.type.element_type
    if op.lhs.type.element_type != el or op.rhs.type.element_type != el:
        return None
    lhs, transposed = blas_operand(op.lhs)
    forms = []
    if transposed:  # A.T @ v
        forms.append((lhs, op.rhs, 0, op.rhs.type.get_shape()[1]))
    if not blas_operand(op.rhs)[1]:  # v @ A
        forms.append((op.rhs, op.lhs, 1, op.lhs.type.get_shape()[0]))
    row_limit = SHARED_ROW_BYTES // from_ir(el).itemsize
    for a, other, axis, n in forms:
        m, k = a.type.get_shape()
        if n == 1 and m > SHORT_K and 8 <= k <= row_limit and _rows_in_memory(a):
            return a, other, axis
    return None


# the longest row of A a shared pass takes: the pass reads the row in its
# reductions, then again from cache in the map that adds it into the output,
# which it loads and stores; where A comes from memory it reads it from there
# once against BLAS's twice. Measured (2 cores, Intel AVX-512, 256-bit
# vectors: `schedule.SHARED_ROWS_VECTOR_BITS`; blocks of 8 rows,
# `shared_row_block`; us, the pass against numpy's two BLAS calls, each in a
# process of its own): float64 4000x4000 (32 KiB rows) 3770 against 5506,
# 2000x4000 1596 / 2150, 1900x2100 895 / 1192, 200x4000 208 / 204, 600x600
# 51 / 190; float32 4000x4000 1586 / 2285, 200x4000 69 / 87. Up to 32 KiB
# rows the cost model's rates decide. (Rows of 16-32 KiB were once measured
# losing, 4000x4000 float64 7.1-7.3 ms: one row per point, the block's
# bytes limited to 16 KiB; rows one at a time read A at 5.9 ms there.)
SHARED_ROW_BYTES = 32 << 10

# rows a shared pass takes per point (`SharedRowsEmitter`): their products'
# reductions are independent chains (one pass over the block's rows: as many
# streams from memory at once), the values between them computed side by
# side, and the map adds the block's rows into the output with one load and
# one store of it, not one per row; of at most SHARED_BLOCK_BYTES together
# (the map re-reads them from L2). Rows of SHARED_VECTOR_ROW_BYTES or more
# take SHARED_LONG_ROW_BLOCK a point, narrower ones SHARED_ROW_BLOCK.
# Measured (2 cores, A.T @ (A @ x), us, 1 / 2 / 4 / 8 / 16 rows a point, a
# process each): float64 4000x4000 5887 / 4613 / 4081 / 3770 / 3583, 30000x1024
# 11218 / 10138 / 9381 / 9247 / 10256, 1000x1000 330 / 208 / 219 / 221 / 234,
# 50000x128 2486 / 1831 / 1528 / 1288 / 1301; float32 4000x4000 2066 / 1796 /
# 1754 / 1586 / 1574, 30000x1024 5641 / 4957 / 4081 / 3586 / 4108, 1000x1000
# 142 / 115 / 100 / 77 / 70; rows of 32 float32: 200000x32 1332 / 901 / 701 /
# 858 / 862, 500x32 2.1 / 1.9 / 1.6 / 1.6 / 1.6
SHARED_ROW_BLOCK = 4
SHARED_LONG_ROW_BLOCK = 8
# ... and where the values between the products and the vector hold
# transcendentals or divisions (`SharedRows.row_ops`), which the pass computes
# for a block's rows side by side (`_row_values_as_vector`): 8 rows, one
# vector of 8 float32 lanes at 256 bits (SHARED_ROWS_VECTOR_BITS)
SHARED_VECTOR_ROWS = 8
# ... on rows of at least this many bytes: the rows' products reach that
# vector through memory (stored one by one, loaded as one vector: a load the
# stores cannot forward to, which waits for them), a delay that rows of 32
# float32 elements do not hide. Measured (the logistic gradient, float32, us
# a call, one block's values side by side / one row at a time): 500x32 4.4 /
# 2.2, 512x32 3.0 / 2.4-2.7, 4096x64 21 / 31, 1024x128 10-13 / 15, 50000x128
# 550-790 / 760-830
SHARED_VECTOR_ROW_BYTES = 256

# a column reduction split into chunks of rows for a GPU (`column_split`)
# takes chunks of at least this many rows: each program then loads at least
# this many rows of its block of columns, and the join adds m / this or
# fewer partial results per column
COLUMN_CHUNK_ROWS = 64
COLUMN_CHUNKS_MAX = 128  # (the join adds this many partials per point, unrolled)
SHARED_BLOCK_BYTES = 256 << 10  # (8 rows of 32 KiB: an eighth of a core's L2)


# what a transcendental or division computed one row at a time (with its
# floating-point checks) counts in the rows of `shared_rows_work`: fitted to
# two calibrations' times (the table's choice within 10% of the faster path
# in 118-119 of 124 cases at 1, 2, 4, 8 and 16 each; at 1 and 2 one of them
# put the 500x32 float32 logistic gradient on the pass, 6.2-7.3 us against
# BLAS's 2.5-2.7, at 8 and 16 neither)
SCALAR_ROW_OP_ROWS = 8


def vector_rows(row_bytes: int, row_ops: int) -> bool:
    """Whether the pass computes the values between a block's products and
    the vector side by side (`SharedRowsEmitter._row_values_as_vector`):
    where they hold transcendentals or divisions (`row_ops`), on rows of at
    least SHARED_VECTOR_ROW_BYTES."""
    return row_ops > 0 and row_bytes >= SHARED_VECTOR_ROW_BYTES


def shared_row_block(m: int, row_bytes: int, shared: "SharedRows") -> int:
    """The rows per point of the shared pass over an (m, k) matrix: the
    largest of SHARED_ROW_BLOCK (SHARED_LONG_ROW_BLOCK on rows of
    SHARED_VECTOR_ROW_BYTES or more; SHARED_VECTOR_ROWS where the values
    between are computed side by side, `vector_rows`), its halves, ..., 1
    that divides m (no remainder rows) and keeps the block within
    SHARED_BLOCK_BYTES, where each row product is read at row i
    (`products`)."""
    if any(str(idx[0]) != str(dim(0)) for _, idx in shared.products):
        return 1
    r = (SHARED_VECTOR_ROWS if vector_rows(row_bytes, shared.row_ops)
         else SHARED_LONG_ROW_BLOCK if row_bytes >= SHARED_VECTOR_ROW_BYTES
         else SHARED_ROW_BLOCK)
    while r > 1 and (m % r or r * row_bytes > SHARED_BLOCK_BYTES):
        r //= 2
    return r


def _rows_in_memory(v: SSAValue) -> bool:
    """v's buffer holds its rows contiguously: an argument the caller passes
    C-contiguous (`AnnotateLayouts`), or a value computed into a buffer of
    its own (not a view of another)."""
    if isinstance(v, BlockArgument):
        return _layout_of_argument(v) == "C"
    return not is_view(v.owner)


def _layout_of_argument(v: BlockArgument) -> str:
    """An argument's layout class (`AnnotateLayouts`; "C" where unnamed)."""
    attrs = getattr(v.owner.parent_op(), "arg_attrs", None)
    lay = None if attrs is None else attrs.data[v.index].data.get("lowering.layout")
    return lay.data if isinstance(lay, StringAttr) else "C"


RowProducts = tuple[tuple[A.DotOp, tuple[AffineExpr, ...]], ...]


@dataclass(frozen=True)
class SharedRows:
    """What a product's pass over its matrix's rows computes besides it: the
    row products (each with the index it is read at: row i, one column) and
    the values between them and the product's vector (each computed once
    per row in that pass, and nowhere else)."""

    products: RowProducts
    inner: frozenset

    @property
    def row_ops(self) -> int:
        """Transcendentals and divisions among the values between: the pass
        computes them one row at a time (scalar), BLAS's path in a
        vectorized kernel of their own."""
        return sum(1 for v in self.inner if isinstance(v.owner, Operation)
                   and U.expensive_op(v.owner))


def row_products(op: Operation) -> SharedRows | None:
    """For a product contracting over A's rows (`rows_contracted`), the
    products by A's rows (`A @ W`, W of up to NARROW_N columns) that its
    vector reads at element i, at one column each: found through generated
    point-wise ops and views whose values nothing outside reads (those, and
    the row products, exist only inside the vector's elements: the pass
    computes each once per row). None where there is no such product."""
    rc = rows_contracted(op)
    if rc is None:
        return None
    a, vec, axis = rc
    start = [(vec, (dim(0), const(0)) if axis == 0 else (const(0), dim(0)))]
    stop: set = set()  # values read from outside: leaves of the walk
    while True:
        found, inner, bad = _walk_rows(a, start, stop)
        leaks = bad | {v for v in inner if any(
            u.operation is not op and not any(r in inner for r in u.operation.results)
            for u in v.uses)}
        if not leaks:
            break
        stop |= leaks
    if not found:
        return None
    return SharedRows(tuple(sorted(found, key=lambda f: str(f[1]))), frozenset(inner))


def _walk_rows(a: SSAValue, start: list, stop: set) -> tuple[list, set, set]:
    """From (value, index) pairs, through generated point-wise ops and views
    (not into `stop`): the products by a's rows met at (row, constant
    column), the values walked through, and the products by a's rows met at
    any other index (`bad`: read where no row's pass has them)."""
    found: list = []
    inner: set = set()
    bad: set = set()
    seen: set = set()
    todo = list(start)
    while todo:
        v, idx = todo.pop()
        key = (v, tuple(map(str, idx)))
        if key in seen or isinstance(v, BlockArgument) or v in stop:
            continue
        seen.add(key)
        o = v.owner
        if isinstance(o, A.DotOp):
            if o.lhs is a and _narrow_rhs(o):
                if str(idx[0]) == "d0" and isinstance(idx[1], AffineConstantExpr):
                    found.append((o, idx))
                    inner.add(v)
                else:
                    bad.add(v)
            continue
        if is_view(o) and not symbols_of([o.properties]):
            inner.add(v)
            todo.append((o.operands[0], through_view(o, idx)))
        elif is_elementwise(o) and generated(o):
            inner.add(v)
            todo.extend((x, idx) for x in o.operands)
    return [(z, i) for z, i in found if z.result not in bad], inner, bad


def view_source(v: SSAValue) -> SSAValue:
    """The value v views (through broadcasts, transposes, slices, reshapes)."""
    while isinstance(v.owner, Operation) and is_view(v.owner):
        v = v.owner.operands[0]
    return v


def _narrow_rhs(op: A.DotOp) -> bool:
    n = op.rhs.type.get_shape()[1]
    return (op.rhs.type.element_type == op.result.type.element_type
            and not isinstance(n, SymDim) and 1 <= n <= NARROW_N)


def shared_rows_work(m: int, k: int, product_cols: list[int], itemsize: int,
                     row_ops: int = 0) -> cm.Work:
    """The work of `A.T @ v` (or `v @ A`) over A (M, K) whose v needs
    products by A's rows into `product_cols` columns each, and `row_ops`
    transcendentals and divisions between: the generated pass reads A once,
    the products' W and writes the output, and runs each row's scalar work
    (its rows count 1 + SCALAR_ROW_OP_ROWS x row_ops per row of A, or
    1 + row_ops / SHARED_VECTOR_ROWS where a block's rows compute them side
    by side, `vector_rows`); BLAS reads A once per product and writes the
    products and v, which the next routine reads back. An A
    bigger than SHARED_CACHE_BYTES is the
    "streamed" variant, with rates of its own: its passes come from memory,
    where both paths run on every core (the generated pass in chunks of
    rows, from the parallel threshold on), but BLAS's transposed product
    pays per row of A (a long, narrow A: 41 ns a row against 13 in cache)."""
    a, s = m * k * itemsize, itemsize
    w, out = k * sum(product_cols) * s, k * s
    between = m * (sum(product_cols) + 1) * s
    # (a block's rows side by side: their row_ops once per SHARED_VECTOR_ROWS rows)
    scalar = (row_ops / SHARED_VECTOR_ROWS if vector_rows(k * s, row_ops)
              else row_ops * SCALAR_ROW_OP_ROWS)
    return cm.Work(a + w + out, a * (1 + len(product_cols)) + w + out + 2 * between,
                   2 * m * k * (1 + sum(product_cols)), m,
                   "streamed" if a > SHARED_CACHE_BYTES else "plain", m * (1 + scalar))


# where a matrix's passes stop coming from cache: half of schedule's STREAM_BYTES
# (about a server L3, which other cores and the program's other data share).
# Fitted: with the variants split at 32 MiB, the 25.6 MB products behaved as
# streamed ones and the fit chose the wrong path for 16 of 78 calibration
# cases; at 16 MiB for none of them
SHARED_CACHE_BYTES = STREAM_BYTES // 2


def shared_rows_choice(op: A.DotOp, shared: SharedRows) -> cm.Choice:
    """The cost model's path for a product whose row products can share its
    pass (`matmul-shared-rows`)."""
    m, k = rows_contracted(op)[0].type.get_shape()
    cols = [z.rhs.type.get_shape()[1] for z in dict.fromkeys(z for z, _ in shared.products)]
    s = from_ir(op.result.type.element_type).itemsize
    return cm.choose("matmul-shared-rows", shared_rows_work(m, k, cols, s, shared.row_ops))


def _contiguous_rows_of_rhs(v: SSAValue) -> bool:
    """B = W.T of a (N, K) value: its columns are W's rows already; or B one
    column (K, 1) whose elements lie next to each other (a reshape of a
    C-contiguous vector, `A @ v`): its column is a row as it lies."""
    op = v.owner
    if isinstance(op, A.TransposeOp) and A.ints(op.permutation) == (1, 0):
        return True
    if v.type.get_shape()[1] != 1:
        return False
    while isinstance(v.owner, A.ReshapeOp):
        v = v.owner.operands[0]
    return _rows_in_memory(v)


# from this size a column reduction (or argmax/argmin down the rows) runs as
# numpy's row-accumulating loop, columns vectorized (`ColumnEmitter`),
# instead of a row kernel per column whose loads walk down the stride, one
# element each: HMM Viterbi's `scores.argmax(0)` and `scores.max(0)` of
# 32 x 32 float64 (8 KiB) took 63 us for 20 steps that way, 13.7 us as
# column kernels (below 64 KiB they all were row kernels)
COLUMN_REDUCTION_BYTES = 1 << 10


def awkward_reduction(op: A.ReduceOp) -> bool:
    """A reduction over leading axes that keeps a long innermost axis (e.g.
    a bias gradient, `g.sum(axis=0)`): the row kernels would walk columns
    with a stride."""
    shape = op.input.type.get_shape()
    # (speed, not results: symbolic sizes decide by their hints, unguarded)
    return bool(shape) and (len(shape) - 1) not in A.ints(op.axes) and hint(shape[-1]) >= 8


def column_reduction(op: A.ReduceOp) -> bool:
    """An awkward reduction big enough that walking columns would cost: one
    the loop level accumulates as numpy does (`accumulated`: row by row
    into the output, `ColumnEmitter`) from COLUMN_REDUCTION_BYTES up, or
    any other kind where the cost model prefers numpy's own loop."""
    if not awkward_reduction(op):
        return False
    if not accumulated(op):
        return path_choice(op).path == "library"
    return _nbytes(op.input) >= COLUMN_REDUCTION_BYTES


ACCUMULATED_KINDS = ("sum", "prod", "max", "min")


def column_arg(op: Operation) -> bool:
    """An argmax/argmin down the rows of a long-rowed array (the leading axis
    of a 2-D or larger input whose innermost axis stays), from
    COLUMN_REDUCTION_BYTES up: computed as numpy orders it, one row after
    another, the columns vectorized (`ColumnEmitter._arg`), where a row
    kernel per column would walk the input down its stride."""
    if not isinstance(op, A.ArgReduceOp) or op.axis.value.data != 0:
        return False
    shape = op.input.type.get_shape()
    return (len(shape) >= 2 and hint(shape[-1]) >= 8 and not symbols_of([op.input.type])
            and _nbytes(op.input) >= COLUMN_REDUCTION_BYTES)


def accumulated(op: A.ReduceOp) -> bool:
    """A column reduction the loop level computes as numpy does: over the
    leading axes, one row after another, into the output (`ColumnEmitter`).
    Others (any/all, an inner axis reduced, a changed element type) are numpy
    externs."""
    axes = A.ints(op.axes)
    return (op.kind.data in ACCUMULATED_KINDS and tuple(axes) == tuple(range(len(axes)))
            and op.input.type.element_type == op.result.type.element_type)


# ---- index transforms (consumer index -> operand index) -----------------------
Index = tuple[AffineExpr, ...]
DATA_DIM = 2000  # analysis placeholder for a gathered (data-dependent) index


def dim(i: int) -> AffineExpr:
    return AffineExpr.dimension(i)


def const(c: int) -> AffineExpr:
    return AffineExpr.constant(c)


def through_view(op: Operation, idx: Index) -> Index:
    if isinstance(op, A.BroadcastOp):
        s, d = op.input.type.get_shape(), op.result.type.get_shape()
        off = len(d) - len(s)
        return tuple(const(0) if n == 1 and d[k + off] != 1 else idx[k + off] for k, n in enumerate(s))
    if isinstance(op, A.TransposeOp):
        perm = A.ints(op.permutation)
        out: list[AffineExpr] = [const(0)] * len(perm)
        for i, p in enumerate(perm):
            out[p] = idx[i]
        return tuple(out)
    if isinstance(op, A.SliceOp):
        return tuple(b + s * e if s != 1 else (e + b if b else e)
                     for e, b, s in zip(idx, A.ints(op.start), A.ints(op.step)))
    if isinstance(op, A.ReshapeOp):
        return reshape_index(op.input.type.get_shape(), op.result.type.get_shape(), idx)
    raise TypeError(op.name)


def reshape_index(src: tuple[int, ...], dst: tuple[int, ...], idx: Index) -> Index:
    """Row-major reshape as index maps, group by group (dims whose products
    agree), so that unit dims and untouched dims map directly."""
    out: list[AffineExpr] = [const(0)] * len(src)
    if 0 in src or 0 in dst:  # no element is ever read
        return tuple(out)
    si = [i for i, n in enumerate(src) if n != 1]
    di = [i for i, n in enumerate(dst) if n != 1]
    a = b = 0
    while a < len(si) or b < len(di):
        ga, gb = [si[a]], [di[b]]
        pa, pb = src[si[a]], dst[di[b]]
        a, b = a + 1, b + 1
        while pa != pb:
            if pa < pb:
                ga.append(si[a]); pa *= src[si[a]]; a += 1  # noqa: E702
            else:
                gb.append(di[b]); pb *= dst[di[b]]; b += 1  # noqa: E702
        if len(ga) == 1 and len(gb) == 1:
            out[ga[0]] = idx[gb[0]]
            continue
        lin: AffineExpr = const(0)
        for d in gb:
            lin = lin * dst[d] + idx[d]
        stride = pa
        for k, s in enumerate(ga):
            stride //= src[s]
            e = lin if stride == 1 else lin // stride
            out[s] = e if k == 0 else e % src[s]
    return tuple(out)


def merged_source(v: SSAValue) -> SSAValue | None:
    """The source of reshape v where every dim of v is a run of consecutive
    source dims merged in row-major order (`x[:, c, i:i+h, j:j+w].reshape(-1)`,
    an im2col row) and the source is not a buffer read as it lies: then v's
    points are best visited in the source's order (`KernelEmitter._emit_over`)."""
    op = v.owner
    if not isinstance(op, A.ReshapeOp) or isinstance(op.input, BlockArgument):
        return None
    src, dst = op.input.type.get_shape(), v.type.get_shape()
    if (symbols_of([src, dst]) or 0 in src
            or sum(n != 1 for n in src) <= sum(n != 1 for n in dst)):
        return None
    k = 0
    for n in dst:  # each dim of v: the product of a run of source dims
        prod = 1
        while prod < n and k < len(src):
            prod *= src[k]
            k += 1
        if prod != n:
            return None
    return op.input if all(n == 1 for n in src[k:]) else None


def is_prefix(idx: Index) -> int | None:
    """len(idx) if idx is exactly (d0, ..., d_{k-1}), else None."""
    for i, e in enumerate(idx):
        if str(e) != f"d{i}":
            return None
    return len(idx)


class Restart(Exception):
    """Lowering starts over with `value` realized (its own kernel) — or, with
    `undefer`, with `value` (a deferred output, see `Lowering.deferrable`)
    given its own kernel at its place instead of a reduction's pass."""

    def __init__(self, value: SSAValue, reason: str, undefer: bool = False,
                 not_in_place: tuple[Operation, ...] = ()):
        self.value, self.reason, self.undefer = value, reason, undefer
        self.not_in_place = not_in_place  # slice assignments to copy instead


@dataclass
class Lowering:
    func_op: func.FuncOp
    layouts: list[str]
    realized: set = field(default_factory=set)
    reasons: list[str] = field(default_factory=list)
    kernel_ops: list[tuple[str, list[str]]] = field(default_factory=list)
    no_defer: set = field(default_factory=set)
    # slice assignments found to clobber a value read later: a routine
    # writes them into a copy of the destination instead
    not_in_place: set = field(default_factory=set)
    # products that share one ordered pass over their matrix's rows with the
    # products they need (`row_products`) where the cost model prefers it
    # (off for the GPU backend: its Triton emitter has no such ordered kernel)
    shared_rows: bool = True
    # threads such a pass may split its rows across (`SharedRowsEmitter`),
    # from a matrix of `parallel_threshold` elements on (schedule's: below
    # it, the pass would run on one thread anyway)
    threads: int = 1
    parallel_threshold: int = 1 << 20
    # a column reduction's rows split into chunks (`ColumnEmitter`) for a
    # device of many processors: (points of the map one program takes, the
    # programs wanted); (0, 0): never (the CPU: one ordered pass, numpy's order)
    column_split: tuple[int, int] = (0, 0)
    # results written into the caller's arguments may be computed in the
    # argument's own buffer (`in_place_result`): the CPU's, whose runtime
    # restores an argument from its undo buffer before an eager re-run
    in_place_args: bool = False

    def __post_init__(self):
        self.block = self.func_op.body.blocks[0]
        private_destinations(self.block)
        self.columns: dict[A.DotOp, SSAValue] = {}
        self._extern_views: dict[Operation, list | None] = {}
        self._write_modes: dict[Operation, str | None] = {}
        self._transposed_sources: dict[Operation, SSAValue] = {}  # (`transposed_source`)
        # an "ordered" slice assignment's dims walked backwards (`slice_write`)
        self.backwards: dict[Operation, tuple[int, ...]] = {}
        self.inserted: list[Operation] = []
        # the cost model's choices, decided on the function as written
        self.shared: dict[A.DotOp, SharedRows] = {}  # product -> what its pass computes
        self.row_product_of: dict[A.DotOp, A.DotOp] = {}  # row product -> that product
        self.in_shared_pass: set[SSAValue] = set()  # values computed only inside such passes
        shared_choices = self._share_rows() if self.shared_rows else {}
        self.paths = []
        for op in self.block.ops:
            if op in shared_choices:
                self.paths.append(f"{describe(op)}: {shared_choices[op].reason()}")
            elif op in self.row_product_of:
                self.paths.append(f"{describe(op)}: computed in the pass of "
                                  f"{describe(self.row_product_of[op])} over its matrix's rows")
            elif shape_class(op) is not None:
                self.paths.append(f"{describe(op)}: {path_choice(op).reason()}")
        self._columns_of_narrow_products()
        self.order = {op: i for i, op in enumerate(self.block.ops)}
        # values `array.flags` reads that other ops read too (in part: a
        # slice, a gather; `passes/keep_flags.py`): computed in full for
        # their flags in a kernel of their own where they are not realized
        # (`flags_kernel`); that read is no use that would realize them
        self.flag_reads = {v for op in self.block.ops if isinstance(op, A.FlagsOp)
                           for v in op.operands if any(
                               not isinstance(u.operation, A.FlagsOp) for u in v.uses)}
        self.uses = Counter()
        for op in self.block.ops:
            for v in op.operands:
                if not (isinstance(op, A.FlagsOp) and v in self.flag_reads):
                    self.uses[v] += 1
        # casts whose matmul writes their narrow result itself (`rounded_product`)
        self.narrowed: dict[Operation, A.DotOp] = {}
        for op in self.block.ops:
            cast = rounded_product(op)
            if cast is not None:
                self.narrowed[cast] = op  # type: ignore[assignment]
        ret = self.block.last_op
        assert isinstance(ret, func.ReturnOp)
        self.realized.update(ret.arguments)
        # result -> the argument it is written back into (`in_place_result`)
        self.writes: dict[SSAValue, BlockArgument] = {}
        if self.in_place_args and not any(isinstance(op, (A.GatherOp, A.ScatterOp))
                                          for op in self.block.ops):
            for k, i in A.written_results(self.func_op).items():
                v, arg = ret.arguments[k], self.block.args[i]
                if (not isinstance(v, BlockArgument) and v not in self.writes
                        and arg not in self.writes.values() and v.type == arg.type):
                    self.writes[v] = arg
        # whether a call may be re-run eagerly (an op that can raise a
        # floating-point flag or an exception): an argument written in
        # place keeps its old values for it (`in_place_result`)
        self.may_rerun = any(A.fp_flags(op) or A.raises_on_values(op) for op in self.block.ops)
        # arguments a slice assignment may write into as a value of the
        # program's own (`slice_write`): where no re-run can need them as
        # they came, the window is written into the argument itself
        self.own_args = (frozenset(a for v, a in self.writes.items()
                                   if isinstance(v.owner, A.InsertSliceOp) and v.owner.dest is a)
                         if not self.may_rerun else frozenset())
        # a result written into an F-ordered argument -> its transpose, which
        # its kernel computes (`MemoryOrderEmitter`: the argument's memory
        # order); made here, erased with the B.T's when lowering ends
        self.memory_order: dict[SSAValue, SSAValue] = {}
        for v, arg in self.writes.items():
            shape = v.type.get_shape()
            if (self.layouts[arg.index] == "F" and len(shape) >= 2
                    and isinstance(v.owner, Operation) and not symbols_of([v.type])):
                t = reversed_transpose(v)
                self.block.insert_op_after(t, v.owner)
                self.inserted.append(t)
                self.memory_order[v] = t.result
        for op in self.block.ops:
            if not isinstance(op, func.ReturnOp):
                self.realized.update(self._realized_by(op))
        self.overwritten = overwritten(self.block, self.uses)
        self._realize_costly_reuses()

    def _share_rows(self) -> dict[A.DotOp, cm.Choice]:
        """The cost model's choice for each product whose row products could
        share its pass (`row_products`); those it sends down the generated
        path go to `shared`, their row products to `row_product_of`."""
        choices = {}
        for op in self.block.ops:
            found = row_products(op) if op not in self.row_product_of else None
            if found is None or any(z in self.shared for z, _ in found.products):
                continue
            choices[op] = shared_rows_choice(op, found)
            if choices[op].path == "generated":
                self.shared[op] = found
                for z, _ in found.products:
                    self.row_product_of[z] = op
                self.in_shared_pass |= found.inner
        return choices

    def row_chunks(self, m: int, k: int) -> int:
        """The chunks a shared pass over an (m, k) matrix splits its rows
        into (`SharedRowsEmitter`): one per thread, from a matrix of
        `parallel_threshold` elements on; 1: not split."""
        if self.threads <= 1 or m * k < self.parallel_threshold:
            return 1
        return min(self.threads, m)

    def column_chunks(self, m: int, k: int) -> int:
        """The chunks a column reduction over m rows of k points splits its
        rows into (`ColumnEmitter`): with `column_split` (block, wanted), a
        GPU's, enough that the k points' blocks times the chunks reach the
        programs wanted; else one per thread from `parallel_threshold`
        elements on (`row_chunks`: one thread walking every row of a
        4096x4096 float32 sum ran slower than numpy's own pass); each chunk
        of COLUMN_CHUNK_ROWS rows or more; 1: not split."""
        block, wanted = self.column_split
        n = -(-wanted // -(-k // block)) if block else self.row_chunks(m, k)
        return max(1, min(n, m // COLUMN_CHUNK_ROWS, COLUMN_CHUNKS_MAX))

    def _columns_of_narrow_products(self) -> None:
        """A narrow matmul reads B's columns as rows: B.T made once, first
        (before any kernel, so that the one writing A can join the product's);
        so does a row product (`row_products`) into more than one column."""
        for op in list(self.block.ops):
            if op in self.row_product_of:
                wanted = op.rhs.type.get_shape()[1] > 1
            else:
                wanted = isinstance(op, A.DotOp) and narrow_dot(op)
            if wanted and not _contiguous_rows_of_rhs(op.rhs):
                same = next((u.operation for u in op.rhs.uses if isinstance(u.operation, A.TransposeOp)
                             and A.ints(u.operation.permutation) == (1, 0)), None)
                if same is not None:  # B.T is in the program already (`dlogits @ W2.T`):
                    same.detach()  # made where a new one would be (before the product)
                    t = same
                else:
                    k_, n_ = op.rhs.type.get_shape()
                    t = A.TransposeOp(op.rhs, (1, 0), TensorType(op.rhs.type.element_type, [n_, k_]))
                    self.inserted.append(t)
                rhs_op = op.rhs.owner
                if isinstance(rhs_op, Operation):
                    self.block.insert_op_after(t, rhs_op)
                else:
                    self.block.insert_op_before(t, self.block.first_op)
                self.columns[op] = t.result

    def _realized_by(self, op: Operation) -> list[SSAValue]:
        """The values op's own rule realizes (its results, its operands, or
        none: an op computed inline where its consumer needs it)."""
        if (isinstance(op, A.ReduceOp) and column_reduction(op) and accumulated(op)) or (
                isinstance(op, (A.ScatterOp, A.GatherOp, A.ScanOp)) and generated(op)) or \
                column_arg(op):
            # its own kernel(s); consumers load it. (A gather's kernel runs
            # over all of it: each index is checked, as numpy checks them,
            # even where a consumer reads only some: `x[i][:1]`.)
            return list(op.results)
        if op in self.narrowed:  # written by its matmul (`rounded_product`)
            return [op.results[0]]
        if isinstance(op, A.FlagsOp):
            # computed for their flags: each in its kernel, whose stores go
            # where nothing else reads it (`flags_only`); those read by
            # other ops too where they are made (`flags_kernel`)
            return [o for o in op.operands if not isinstance(o, BlockArgument)
                    and o not in self.flag_reads]
        if op in self.shared:  # its own kernel over the rows of its matrix, read where it lies
            return [op.result, rows_contracted(op)[0]]
        if op in self.row_product_of:  # computed in that kernel, from W (or W.T) read where it lies
            return [self.columns[op]] if op in self.columns else [view_source(op.rhs)]
        if isinstance(op, A.DotOp) and narrow_dot(op):
            # its own kernel: N reductions per row
            return [op.result] + ([self.columns[op]] if op in self.columns else [])
        if isinstance(op, A.DotOp) and generated(op):
            # read K times per output row/column: from buffers, B laid out
            # (K, N) so that its rows load as vectors
            return [o for o in op.operands if not isinstance(o, BlockArgument)
                    or o.owner is not self.block]
        mode = self.write_mode(op)
        if mode == "staged":  # the new part first, in a buffer of its own
            return [op.dest, _under_reshapes(op.source, op.dest), op.result]
        if mode in ("direct", "ordered"):
            return [op.dest, op.result]  # the source is computed in its kernel
        if mode == "copy":
            return [op.result]  # the destination and the source computed in its kernels
        if self.pieces_in_kernels(op):
            if self.nested_piece(op.result):
                return []  # written by the concatenation it is a piece of
            return [op.result]  # each piece computed in its kernel, at its offset
        if not generated(op):
            views = self.extern_views(op)
            if views is not None:  # it reads views of its sources' buffers
                operands = [src for src, _ in views]
            elif isinstance(op, A.DotOp):
                # BLAS reads a transposed operand as it is (a strided view)
                operands = [src for src, _ in dot_operands(op)]
                if op.result.uses and next(iter(op.result.uses)).operation in self.narrowed:
                    return operands  # (its result is its cast's: `rounded_product`)
            else:
                operands = list(op.operands)
            return operands + list(op.results)
        return []

    def pieces_in_kernels(self, op: Operation) -> bool:
        """A concatenation written piece by piece, each piece's expression
        fused into the kernel that writes it."""
        return concat_in_kernels(op) and all(self.computed_once(o) for o in op.inputs)

    def nested_piece(self, v: SSAValue) -> bool:
        """v, a concatenation written piece by piece, is itself a piece
        of one (`sink-concat` nests them where two axes are split): its
        pieces are written into that one's buffer, at both offsets."""
        if not (isinstance(v.owner, A.ConcatOp) and self.pieces_in_kernels(v.owner)
                and v.has_one_use()):
            return False
        user = next(iter(v.uses)).operation
        return isinstance(user, A.ConcatOp) and self.pieces_in_kernels(user)

    def concat_leaves(self, op: A.ConcatOp, base: tuple[int, ...] | None = None
                      ) -> list[tuple[SSAValue, tuple[int, ...]]]:
        """The pieces of a concatenation, through nested ones
        (`nested_piece`), each with its offset in the result; empty ones
        left out."""
        axis = op.axis.value.data
        base = base or (0,) * op.result.type.get_num_dims()
        out, off = [], 0
        for piece in op.inputs:
            shape = piece.type.get_shape()
            at = tuple(b + off if d == axis else b for d, b in enumerate(base))
            if self.nested_piece(piece):
                out += self.concat_leaves(piece.owner, at)
            elif 0 not in shape:
                out.append((piece, at))
            off += shape[axis]
        return out

    def computed_once(self, v: SSAValue) -> bool:
        """Whether computing v where it is read computes each of its elements
        once: v, and through views the value they view, has this one use
        (or is an argument, a constant or a realized value, read where it
        lies). A piece of `np.roll(h, 1)` is a slice of h, whose other
        slices and uses would each compute h again."""
        while True:
            if isinstance(v, BlockArgument) or v in self.realized or \
                    isinstance(v.owner, (A.ConstantOp, A.IotaOp)):
                return True
            if self.uses[v] != 1:
                return not is_view(v.owner) and read_apart(v)
            if not is_view(v.owner):
                return True
            v = v.owner.operands[0]

    def extern_views(self, op: Operation) -> list[tuple[SSAValue, list[Operation]]] | None:
        """Per operand of an extern, (source, views) where it reads any
        operand through views (`extern_view`), else None. A matmul whose only
        views are transposes of the last two dims reads them as BLAS's
        transposed operands (`blas_operand`: no body)."""
        if op in self._extern_views:
            return self._extern_views[op]
        views = [extern_view(o) for o in op.operands]
        if not any(chain for _, chain in views) or (isinstance(op, A.DotOp) and all(
                len(chain) <= 1 and all(_blas_transpose(c) for c in chain) for _, chain in views)):
            views = None
        self._extern_views[op] = views
        return views

    def _realize_costly_reuses(self) -> None:
        """A value used more than once that costs too much to compute at
        each use gets its buffer."""
        for op in self.block.ops:
            for r in op.results:
                if r in self.in_shared_pass:  # (computed once per row there)
                    continue
                if r not in self.realized and self.uses[r] >= 2 and not read_apart(r) \
                        and self.cost(r) >= RECOMPUTE_LIMIT:
                    self.realized.add(r)
                    self.reasons.append(f"{op.name} is realized: used {self.uses[r]} times and "
                                        f"costs {self.cost(r)} to recompute")

    def cost(self, v: SSAValue, depth: int = 0) -> int:
        op = v.owner
        if isinstance(v, BlockArgument) or (depth and v in self.realized) or depth > 16:
            return 0
        if isinstance(op, (A.ReduceOp, A.ArgReduceOp)):
            return 1  # computed once per row in the consumer's kernel
        if isinstance(op, A.DotOp):
            return 2 * op.lhs.type.get_shape()[-1]
        u = U.of_op(op)
        own = (RECOMPUTE_EXPENSIVE if u is not None and u.recompute == "expensive"
               else 0 if is_view(op) or isinstance(op, A.ConstantOp) else 1)
        return own + sum(self.cost(o, depth + 1) for o in op.operands)

    # ---- driver --------------------------------------------------------------
    def run(self) -> func.FuncOp:
        try:
            for _ in range(64 + len(self.realized)):
                try:
                    return self._emit_func()
                except Restart as r:
                    if r.undefer:
                        self.no_defer.add(r.value)
                        continue
                    for op in r.not_in_place:
                        self.not_in_place.add(op)
                        self._write_modes.pop(op, None)
                        self.realized.update([*op.operands, *op.results])
                    self.realized.add(r.value)
                    self.reasons.append(r.reason)
            raise RuntimeError("lower-to-loop did not converge")
        finally:  # the tensor-level function is left as it came (a moved B.T aside: a view)
            for t in self.inserted:
                self.block.erase_op(t)

    def _emit_func(self) -> func.FuncOp:
        in_types = [memref_of(a.type, lay) for a, lay in zip(self.block.args, self.layouts)]
        body = Block(arg_types=in_types)
        self.out = body
        self.buffer: dict[SSAValue, SSAValue] = dict(zip(self.block.args, body.args))
        # the F-ordered arguments' buffers (`InsertEmitter`: a window of one
        # written in its memory order)
        self.f_args = {b for b, lay in zip(body.args, self.layouts) if lay == "F"}
        self.kernels = 0
        self.kernel_ops = []
        self.pending: set[SSAValue] = set()  # deferred: a later reduction's pass stores them
        self.carried: dict[SSAValue, KernelEmitter] = {}  # ... and the kernel that did
        # a value whose buffer slice assignments wrote into since -> those
        # assignments and their windows: its values there are gone (`read`)
        self.clobbered: dict[SSAValue, list[tuple[Operation, tuple | None]]] = {}
        self.sharing: dict[SSAValue, list[SSAValue]] = {}  # buffer -> the values it held
        self.conflicts: dict[Operation, str] = {}  # assignments that wrote over a value read later
        self.flag_buffers: list[SSAValue] = []  # (`flags_kernel`'s)
        for op in self.block.ops:
            if isinstance(op, func.ReturnOp):
                if self.pending:  # no reduction's pass took it: its own kernel, where it was
                    raise Restart(next(iter(self.pending)), "", undefer=True)
                body.add_op(func.ReturnOp(*[self.read(v) for v in op.arguments]))
                continue
            for r in op.results:
                if r in self.realized:
                    if self.deferrable(op, r):
                        self._alloc(r)
                        self.pending.add(r)
                        continue
                    self._realize(op, r)
            for r in op.results:
                if r in self.flag_reads and (r not in self.buffer or r in self.overwritten):
                    self.flags_kernel(r)
        if self.conflicts:
            ops = tuple(self.conflicts)
            raise Restart(ops[0].result, "; ".join(self.conflicts.values()), not_in_place=ops)
        outs = [o.type for o in body.last_op.operands]
        f = func.FuncOp(self.func_op.sym_name.data, FunctionType.from_lists(in_types, outs), Region(body))
        if self.func_op.arg_attrs is not None:
            f.arg_attrs = self.func_op.arg_attrs
        return f

    def flags_kernel(self, v: SSAValue) -> None:
        """A value read in part, not realized (or its buffer never
        computed: slice assignments cover it), computed over all its
        elements where it is made, for its flags: a kernel storing into a
        buffer nothing reads, which `flags_only` turns into `loop.flags`
        and drops. The schedule may fuse it with the kernels beside it."""
        a = memref.AllocOp([], [], memref_of(v.type))
        self.out.add_op(a)
        KernelEmitter(self, v, a.memref).emit()
        self.flag_buffers.append(a.memref)

    def deferrable(self, op: Operation, v: SSAValue) -> bool:
        """A realized point-wise value (no reduction, matmul or gather in its
        expression) that a row reduction reads, point by point, through
        point-wise ops only: `y = x * 2 + 1` returned and summed. Its kernel
        is deferred: the reduction's pass over y computes each point, stores
        it, and folds it in (one pass over memory instead of a write and a
        re-read: Inductor's multi-output reduction). Where that does not
        happen as planned, `Restart(undefer=True)` gives y its own kernel."""
        if v in self.no_defer or isinstance(v, BlockArgument) or len(op.results) != 1 \
                or op in self.narrowed:  # (a rounded product: its matmul writes it)
            return False
        if not generated(op) or isinstance(op, (A.ReduceOp, A.ArgReduceOp, A.DotOp, A.ScatterOp,
                                                A.ScanOp, A.GatherOp)) or is_view(op):
            return False
        shape = v.type.get_shape()
        found: list = []
        KernelEmitter(self, v, v)._collect(v, tuple(dim(i) for i in range(len(shape))), found, set())
        if found:
            return False
        todo, seen = [v], {v}
        while todo:  # forward through unrealized point-wise users of the same shape
            for use in todo.pop().uses:
                user = use.operation
                if isinstance(user, A.ReduceOp):
                    if (user.input.type.get_shape() == shape
                            and not (column_reduction(user) and accumulated(user))):
                        return True
                    continue
                if (len(user.results) == 1 and user.results[0] not in seen
                        and user.results[0] not in self.realized and not is_view(user)
                        and not isinstance(user, (A.DotOp, A.GatherOp, A.ScatterOp, A.ScanOp,
                                                  A.ArgReduceOp))
                        and user.results[0].type.get_shape() == shape):
                    seen.add(user.results[0])
                    todo.append(user.results[0])
        return False

    def _alloc(self, v: SSAValue) -> SSAValue:
        t = memref_of(v.type)
        a = memref.AllocOp([], [], t)
        self.out.add_op(a)
        self.buffer[v] = a.memref
        return a.memref

    def transposed_source(self, op: A.InsertSliceOp) -> SSAValue:
        """The transpose of a slice assignment's new part (`InsertEmitter`
        into an F-ordered argument): made once, before the assignment,
        erased with the other inserted ops when lowering ends."""
        if op not in self._transposed_sources:
            t = reversed_transpose(op.source)
            self.block.insert_op_before(t, op)
            self.inserted.append(t)
            self._transposed_sources[op] = t.result
        return self._transposed_sources[op]

    def write_mode(self, op: Operation) -> str | None:
        """How a slice assignment is written: `slice_write`'s "direct" or
        "staged" (into the destination's own buffer), else "copy" — a kernel
        copies the destination into the result's buffer and another writes
        the window there, its new part computed inline (the destination
        untouched: no constraint on its other readers) —, or None for one
        generated code cannot do (float16: a numpy routine). Memoized; an
        assignment found to clobber a value read later (`read`) is copied."""
        if op not in self._write_modes:
            mode, self.backwards[op] = ((None, ()) if op in self.not_in_place
                                        else slice_write(op, self.uses, self.order,
                                                         self.own_args))
            if mode is None and isinstance(op, A.InsertSliceOp) and not any(
                    _half(v) for v in (op.source, op.dest)) and (
                    op.source.type.element_type == op.dest.type.element_type):
                mode = "copy"
            self._write_modes[op] = mode
        return self._write_modes[op]

    def read(self, v: SSAValue, region: tuple | None = None) -> SSAValue:
        """v's buffer, for a read of it (of `region` of it where known: a
        box as `_box` gives them): where a slice assignment already wrote
        over v in that buffer, other than apart from the region (an
        analysis of the function cannot see every order kernels end up in —
        a value computed inline in a later consumer, a second write to the
        same destination), lowering starts over with that assignment done
        by a routine into a copy."""
        for op, window in self.clobbered.get(v, ()):
            if region is not None and window is not None and _disjoint(region, window):
                continue  # (written elsewhere only: an FIR tap's one element)
            # (every such read of this attempt is found before it starts over)
            what = (f"argument {v.index}" if isinstance(v, BlockArgument)
                    else describe(v.owner))  # type: ignore[arg-type]
            self.conflicts.setdefault(op, f"{describe(op)} is copied: {what} is "
                                          "read after it would have been written over")
        return self.buffer[v]

    def overwritten_operand(self, op: Operation, views) -> SSAValue | None:
        """The operand of a point-wise extern (`writes_over_operand`) whose
        buffer its result can take: a value of the program (not an
        argument, not a constant: those buffers are the caller's or read
        only) of the result's type, read as it lies, that nothing but this
        op reads — its buffer is free once the op has read it. An op found
        to clobber a value read later (`read`) gets a buffer of its own."""
        if not writes_over_operand(op) or op in self.not_in_place:
            return None
        for i, o in enumerate(op.operands):
            if (isinstance(o, BlockArgument) or isinstance(o.owner, (A.ConstantOp, A.IotaOp))
                    or self.uses[o] != 1 or o.type != op.results[0].type
                    or (views is not None and views[i][1]) or o not in self.buffer
                    or not isinstance(self.buffer[o].owner, memref.AllocOp)):
                continue
            return o
        return None

    def in_place_result(self, op: Operation, v: SSAValue) -> None:
        """A result written back into an argument (`self.writes`: `x *= y`,
        `x[...] = f(x)`) computed by its kernel in the argument's buffer,
        as numpy's own ufunc writes over x, instead of a buffer of its own
        that the runtime copies into x after the call: the kernel reads x
        only at the very point it stores (else, or where a later kernel
        reads x's old values, `read` finds it clobbered, and lowering starts
        over with the result in a buffer of its own). Where the call may be
        re-run eagerly (`may_rerun`: numpy must see the caller's arrays as
        they came), the kernel first stores each old value into an undo
        buffer (`loop.UNDO_ATTR`) the runtime copies back before the re-run
        (the native entry too: one more stream of stores, where a buffer of
        its own copied into x costs two: `x += y` float64 100x500 23 us in
        place, 35 apart, numpy 13-15; 8x8 0.4 against 0.6)."""
        arg = self.writes[v]
        buf = self.buffer[v] = self.read(arg)
        vt = self.memory_order.get(v)
        (KernelEmitter(self, v, buf) if vt is None else MemoryOrderEmitter(self, v, buf, vt)).emit()
        k = self.out.last_op
        stores = [o for o in k.walk() if isinstance(o, L.StoreOp) and o.buffer is buf]
        st = stores[0] if len(stores) == 1 else None
        if (not isinstance(k, L.KernelOp) or st is None
                or any(isinstance(o, L.IndexOp) for o in k.walk())
                or any(isinstance(o, L.LoadOp) and o.buffer is buf
                       and (o.map.data != st.map.data or list(o.indices) != list(st.indices))
                       for o in k.walk())):
            raise Restart(v, f"{describe(op)} is computed apart from the argument it is "
                             "written into: its kernel reads that argument elsewhere than "
                             "where it stores", not_in_place=(op,))
        held = self.sharing.setdefault(buf, [arg])
        for u in held:
            self.clobbered.setdefault(u, []).append((op, None))
        held.append(v)
        if not self.may_rerun:
            return
        # (in the kernel's order: the transpose of an F-ordered argument's values)
        undo = memref.AllocOp([], [], memref_of(v.type if vt is None else vt.type))
        undo.attributes[L.UNDO_ATTR] = IntegerAttr(arg.index, i64)
        at = st.map.data
        if vt is not None:
            undo.attributes[L.UNDO_TRANSPOSED_ATTR] = UnitAttr()
            at = AffineMap.identity(len(st.indices))
        self.out.insert_op_before(undo, k)
        old = L.LoadOp(buf, list(st.indices), st.map.data)
        st.parent_block().insert_ops_before([old, L.StoreOp(old.results[0], undo.memref,
                                                            list(st.indices), at)], st)
        nk = k.with_buffers([*k.buffers, undo.memref])
        nk.attributes.update(k.attributes)
        Rewriter.replace_op(k, nk)

    def untouched(self, view: Operation) -> bool:
        """A slice of a value whose buffer slice assignments wrote into since
        (`clobbered`), apart from every window they wrote: its values are
        still there (a Seidel sweep's next row, read after the row above
        was written in place)."""
        writes = self.clobbered.get(view.operands[0])
        if not writes or not isinstance(view, A.SliceOp):
            return False
        box = _box(A.ints(view.start), A.ints(view.step), view.result.type.get_shape())
        return box is not None and all(w is not None and _disjoint(box, w) for _, w in writes)

    def _realize(self, op: Operation, v: SSAValue) -> None:
        if op in self.narrowed:  # its matmul's extern writes it (`rounded_product`)
            op = self.narrowed[op]
        mode = self.write_mode(op)
        if mode == "copy":
            if v not in self.buffer:
                buf = self._alloc(v)
                CopyEmitter(self, v, buf).emit()
                InsertEmitter(self, v, buf).emit()
            return
        if mode is not None:
            if v not in self.buffer:
                buf = self.buffer[v] = self.read(op.dest)
                InsertEmitter(self, v, buf).emit()
                window = _box(A.ints(op.start), A.ints(op.step), op.source.type.get_shape())
                held = self.sharing.setdefault(buf, [op.dest])
                for u in held:
                    self.clobbered.setdefault(u, []).append((op, window))
                held.append(v)
            return
        if v in self.overwritten:  # never read: slice assignments cover it all first
            self._alloc(v)
            return
        if concat_in_kernels(op):
            if v not in self.buffer:
                buf = self._alloc(v)
                for piece, at in self.concat_leaves(op):
                    ConcatEmitter(self, v, buf, piece, at).emit()
            return
        if op in self.shared:
            if v not in self.buffer:
                SharedRowsEmitter(self, v, self._alloc(v)).emit()
            return
        if not generated(op):
            results = list(op.results) if v.owner is op else [v]  # (v: a rounded product's cast)
            if all(r in self.buffer for r in results):
                return  # one extern makes all of a routine's results
            fn = f"numpy:{op.name}"
            if isinstance(op, A.RoutineOp):
                fn = f"numpy:{op.fn.data}"  # the routine's numpy name (`explain` shows it)
            views = self.extern_views(op)
            if views is not None:  # (a view realized for another reason: its buffer)
                views = [(o, []) if o in self.buffer else sv for o, sv in zip(op.operands, views)]
                ins = [self.read(src) for src, _ in views]
                if isinstance(op, A.DotOp):
                    fn = "matmul"
            elif isinstance(op, A.DotOp):
                ops = dot_operands(op)
                ins = [self.read(o) for o, _ in ops]
                fn = "matmul" + ("_" + "".join("t" if t else "n" for _, t in ops)
                                 if any(t for _, t in ops) else "")
            else:
                ins = [self.read(o) for o in op.operands]
            reads = [src for src, _ in views] if views is not None else \
                [src for src, _ in ops] if isinstance(op, A.DotOp) else []
            for o in [*op.operands, *(blas_operand(o)[0] for o in op.operands), *reads]:
                if o in self.pending:  # read whole, before a reduction's pass stores it
                    raise Restart(o, "", undefer=True)
            over = self.overwritten_operand(op, views) if v.owner is op else None
            if over is not None:  # its result in that operand's buffer (numpy's `x *= y`)
                buf = self.buffer[op.results[0]] = self.buffer[over]
                held = self.sharing.setdefault(buf, [over])
                for u in held:
                    self.clobbered.setdefault(u, []).append((op, None))
                held.append(op.results[0])
                outs = [buf]
            else:
                outs = [self._alloc(r) for r in results]
            if views is not None:
                self.out.add_op(L.ExternOp(fn, ins, outs, op, [chain for _, chain in views]))
            else:
                self.out.add_op(L.ExternOp(fn, ins, outs, None if isinstance(op, A.DotOp) else op))
            # (a rounded product: its cast's rounding is the library's)
            self.kernel_ops.append((f"extern {fn}", [describe(op)] + (
                [describe(v.owner)] if v.owner is not op else [])))  # type: ignore[arg-type]
            return
        if v in self.buffer:
            return
        if v in self.writes and op not in self.not_in_place and not (
                isinstance(op, A.ReduceOp) and column_reduction(op) or column_arg(op)
                or isinstance(op, (A.ScatterOp, A.ScanOp)) or op in self.narrowed
                or isinstance(op, A.DotOp) and narrow_dot(op)):
            self.in_place_result(op, v)
            return
        buf = self._alloc(v)
        if isinstance(op, A.ReduceOp) and column_reduction(op) or column_arg(op):
            ColumnEmitter(self, v, buf).emit()
            return
        if isinstance(op, A.ScatterOp):
            ScatterEmitter(self, v, buf).emit()
            return
        if isinstance(op, A.ScanOp):
            ScanEmitter(self, v, buf).emit()
            return
        if isinstance(op, A.DotOp) and narrow_dot(op):
            DotEmitter(self, v, buf).emit()
            return
        KernelEmitter(self, v, buf).emit()


# numpy routines computing their one result point by point from operands of
# its shape (numpy's own `x *= y` writes over x): the result may take an
# operand's buffer (`Lowering.overwritten_operand`)
POINTWISE_ROUTINES = frozenset({"np.ufunc"})


def writes_over_operand(op: Operation) -> bool:
    return (isinstance(op, A.RoutineOp) and op.fn.data in POINTWISE_ROUTINES
            and len(op.results) == 1)


def in_place(op: Operation, uses: Counter, own: frozenset = frozenset()) -> bool:
    """A slice assignment done in the destination's own buffer: the
    destination is a value of the program (not the caller's array: an eager
    re-run needs it pristine; but those of `own`, which no re-run needs
    and the assignment's result is written back into) that nothing but
    this assignment reads."""
    return (isinstance(op, A.InsertSliceOp)
            and (not isinstance(op.dest, BlockArgument) or op.dest in own)
            and uses[op.dest] == 1 and not any(_half(v) for v in (op.source, op.dest))
            and op.source.type.element_type == op.dest.type.element_type)


def slice_write(op: Operation, uses: Counter, order: dict[Operation, int],
                own: frozenset = frozenset()) -> tuple[str | None, tuple[int, ...]]:
    """How a slice assignment is written into its destination's own buffer
    instead of a copy of all of it (numpy's way: `x[w] = ...` writes into
    x): "direct" — `in_place`, or a destination otherwise read only by ops
    placed before it (through views; `Lowering.read` checks their kernels
    really run before) and by its own new part, which reads it only apart
    from the window or at the very point it writes (`x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]`, `C[i, :i+1] = beta
    * C[i, :i+1] + ...`): one kernel computes the new part and stores it;
    "ordered" — the same, but the new part also reads the window's points
    shifted by a constant (`best[w:] = np.maximum(best[w:], best[:-w] + v)`),
    all of them in directions one order of the points serves: each point is
    read before the point that writes over it runs; the kernel's points run
    in that order, on one thread (the second of the pair: the dims of the
    new part, counting only those of more than one point, walked
    backwards; () for the other modes); "staged" — the new part reads the destination where the
    window overlaps it otherwise (`x[0] = x.sum()`, shifts both ways): it
    is computed into a buffer of its own first (reading the old values, as
    numpy's temporary does), then copied into the window; None — neither
    (`order`: each op's position in the block: a value made before the
    destination cannot read it, so the walk of the new part stops there)."""
    if in_place(op, uses, own):
        return "direct", ()
    if (not isinstance(op, A.InsertSliceOp)
            or isinstance(op.dest, BlockArgument) and op.dest not in own
            or any(_half(v) for v in (op.source, op.dest))
            or op.source.type.element_type != op.dest.type.element_type):
        return None, ()
    window = _box(A.ints(op.start), A.ints(op.step), op.source.type.get_shape())
    if window is None:
        return None, ()
    expr, reads = _new_part(op, order)
    # every other reader: the new part, or ops placed before op (through
    # views). Whether each really reads dest before op's kernel writes over
    # it (a value computed inline in a later consumer would not) is checked
    # as kernels are emitted (`Lowering.read`)
    dest = op.dest
    todo = [u.operation for u in dest.uses if u.operation is not op
            and not isinstance(u.operation, A.FlagsOp)]  # (`Lowering.flags_kernel`: before op)
    while todo:
        user = todo.pop()
        if any(r in expr for r in user.results):
            continue
        if is_view(user):
            todo.extend(u.operation for u in user.results[0].uses)
        elif user.parent_block() is not op.parent_block() or not user.is_before_in_block(op):
            return None, ()
    shifts = []
    for box, pointwise in reads:
        if box is None:  # the destination itself, or an unknown slice of it
            return "staged", ()
        if _disjoint(box, window):
            continue
        shift = _shift(box, window) if pointwise else None
        if shift is None:
            return "staged", ()
        if any(shift):
            shifts.append(shift)
    if not shifts:
        return "direct", ()
    backwards = _walked_backwards(shifts)
    if backwards is None or not all(is_elementwise(v.owner) or is_view(v.owner) for v in expr):
        return "staged", ()
    return "ordered", backwards


def _new_part(op: A.InsertSliceOp, order: dict[Operation, int]) -> tuple[set, list]:
    """The values of a slice assignment's new part (walked from its source
    down to values made before the destination, realized or not generated)
    and its reads of the destination: (box, pointwise) per slice of it
    (box None: the destination read whole, or a slice whose bounds are size
    symbols), pointwise where the slice is read point for point with the
    window (only elementwise ops and unit-dim reshapes between them)."""
    dest = op.dest
    shape = _squeezed(op.source.type.get_shape())
    expr: set = set()
    reads: list = []
    stack, seen = [(op.source, True)], set()
    made = -1 if isinstance(dest, BlockArgument) else order[dest.owner]  # (an argument: first)
    while stack:
        v, pointwise = stack.pop()
        if v is dest:
            reads.append((None, False))
            continue
        if ((v, pointwise) in seen or isinstance(v, BlockArgument)
                or order[v.owner] < made or not generated(v.owner)):
            continue
        seen.add((v, pointwise))
        expr.add(v)
        owner = v.owner
        if isinstance(owner, A.SliceOp) and owner.input is dest:
            box = _box(A.ints(owner.start), A.ints(owner.step), v.type.get_shape())
            reads.append((box, pointwise and _squeezed(v.type.get_shape()) == shape))
            continue
        flat = ((is_elementwise(owner) and not isinstance(owner, A.ConstantOp))
                or (isinstance(owner, A.ReshapeOp)  # (unit dims only)
                    and _squeezed(owner.input.type.get_shape()) == _squeezed(v.type.get_shape())))
        stack.extend((o, pointwise and flat and _squeezed(o.type.get_shape()) == _squeezed(
            v.type.get_shape())) for o in owner.operands)
    return expr, reads


def _shift(box, window) -> tuple[int, ...] | None:
    """Where a slice read point for point with a window reads, in points of
    the window, per dim of more than one point: the read at point p is of
    the point p + shift writes (all zeros: p itself). None where the two
    walk the destination differently (other steps or counts) or no read
    point is ever written (a shift between the window's steps: the read is
    of points the window skips, so the write order does not matter: ())."""
    out = []
    for (b1, t1, n1), (b2, t2, n2) in zip(box, window):
        if n1 != n2 or t1 != t2:
            return None
        if n1 <= 1:
            if b1 != b2:
                return ()
            continue
        if (b1 - b2) % t2:
            return ()
        out.append((b1 - b2) // t2)
    return tuple(out)


def _walked_backwards(shifts: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    """The dims to walk backwards so that every point p is read (at p -
    shift, for each shift) before that point is written over: the first
    dim in which a shift is not 0 is walked forwards where it is positive
    (the read is of a point later in the order), backwards where negative.
    None where two shifts need one dim walked both ways."""
    way: dict[int, int] = {}
    for s in shifts:
        d = next(i for i, x in enumerate(s) if x)
        sign = 1 if s[d] > 0 else -1
        if way.setdefault(d, sign) != sign:
            return None
    return tuple(sorted(d for d, sign in way.items() if sign < 0))


def _under_reshapes(v: SSAValue, dest: SSAValue) -> SSAValue:
    """The computed value a staged assignment's new part reshapes (`x[i, 1:-1]
    = row` stores `row` reshaped to (1, n)): that value gets the buffer, so a
    later expression reading it (the next Seidel row reads this one) loads it
    instead of computing it again from a destination written over since."""
    while isinstance(v.owner, A.ReshapeOp) and v.owner.input is not dest:
        v = v.owner.input
    return v


def _squeezed(shape) -> tuple:
    return tuple(n for n in shape if n != 1)


def _box(start, step, shape) -> tuple[tuple[int, int, int], ...] | None:
    """Per dim (first index, step, count) of a static slice; None where a
    bound is a size symbol. Two slices read the same points in the same
    order exactly when their boxes are equal (a reversed slice is not)."""
    out = []
    for b, t, n in zip(start, step, shape):
        if any(isinstance(x, SymDim) for x in (b, t, n)):
            return None
        out.append((int(b), int(t) if n > 1 else 0, int(n)))
    return tuple(out)


def _span(e: AffineExpr, extents: tuple) -> tuple[int, int] | None:
    """[lo, hi] of e over dims d_i in [0, extents[i]) (a dim beyond them,
    or an extent not a positive int: None), for sums and constant
    multiples."""
    if isinstance(e, AffineConstantExpr):
        return (e.value, e.value)
    if isinstance(e, AffineDimExpr):
        n = extents[e.position] if e.position < len(extents) else None
        return (0, n - 1) if type(n) is int and n > 0 else None
    if isinstance(e, AffineBinaryOpExpr) and e.kind in (AffineBinaryOpKind.Add,
                                                        AffineBinaryOpKind.Mul):
        a, b = _span(e.lhs, extents), _span(e.rhs, extents)
        if a is None or b is None:
            return None
        if e.kind == AffineBinaryOpKind.Add:
            return (a[0] + b[0], a[1] + b[1])
        ends = [x * y for x in a for y in b]
        return (min(ends), max(ends))
    return None


def _disjoint(a, b) -> bool:
    """No index in both boxes: apart along some dim (or one is empty)."""
    def span(first, step, n):
        last = first + (n - 1) * step
        return min(first, last), max(first, last)

    for d1, d2 in zip(a, b):
        if d1[2] == 0 or d2[2] == 0:
            return True
        (lo1, hi1), (lo2, hi2) = span(*d1), span(*d2)
        if hi1 < lo2 or hi2 < lo1:
            return True
    return False


OVERWRITE_CHECK_LIMIT = 1 << 24  # elements: a coverage mask costs this many bytes


def overwritten(block: Block, uses: Counter) -> set[SSAValue]:
    """Values whose every element a chain of in-place slice assignments
    replaces before anything reads them: `out = np.zeros((n, m))` filled row
    by row. Their buffer is allocated, never computed."""
    out = set()
    for op in block.ops:
        if not in_place(op, uses) or (isinstance(op.dest.owner, A.InsertSliceOp)
                                      and in_place(op.dest.owner, uses)):
            continue
        if _chain_covers(op, uses):
            out.add(op.dest)
    return out


def _chain_covers(op: A.InsertSliceOp, uses: Counter) -> bool:
    """Whether the chain of slice assignments from `op` on (each one's
    result feeding only the next, done in place) writes every element of
    op's destination (of static shape, one result of its op)."""
    shape = op.dest.type.get_shape()
    if symbols_of(shape):  # (coverage by sizes a call gives: not known here)
        return False
    n = 1
    for d in shape:
        n *= d
    if n > OVERWRITE_CHECK_LIMIT or not isinstance(op.dest.owner, Operation) or len(
            op.dest.owner.results) != 1:  # (one of a routine's results is made with the rest)
        return False
    covered = np.zeros(shape, bool)
    ins = op
    while True:  # along the chain: each assignment's result feeds only the next
        window = [a + c * np.arange(m) for a, c, m in
                  zip(A.ints(ins.start), A.ints(ins.step), ins.source.type.get_shape())]
        covered[np.ix_(*window)] = True
        nxt = [u.operation for u in ins.result.uses]
        if len(nxt) != 1 or not in_place(nxt[0], uses) or nxt[0].dest is not ins.result:
            break
        ins = nxt[0]
    return bool(covered.all())


def private_destinations(block: Block) -> int:
    """A destination made of a constant (`np.empty`, `np.zeros`, `np.full`:
    an `array.constant`, broadcast or not) that a chain of slice assignments
    overwrites entirely, but that other ops read too — after CSE, the one
    `np.empty(n)` of every iteration of a loop the trace unrolled — gets a
    copy of its constant of its own: the chain is then done in place and the
    copy never computed (`overwritten`), where it would otherwise copy the
    shared value before every chain (`cur = np.empty(n); cur[0] = i;
    cur[1:] = ...` per row: one whole pass per row for nothing). The copy
    computes the same value, so nothing else changes. Returns how many."""
    uses = Counter(v for op in block.ops for v in op.operands)
    made = 0
    for op in list(block.ops):
        if not isinstance(op, A.InsertSliceOp) or uses[op.dest] < 2:
            continue
        d = op.dest.owner
        const = d.input.owner if isinstance(d, A.BroadcastOp) else d
        if not isinstance(const, A.ConstantOp) or _half(op.dest) or _half(op.source) \
                or op.source.type.element_type != op.dest.type.element_type:
            continue
        solo = Counter(uses)
        solo[op.dest] = 1  # (as if the chain's destination were its own)
        if not _chain_covers(op, solo):
            continue
        copy = const.clone()
        block.insert_op_before(copy, op)
        if d is not const:
            bcast = d.clone()
            bcast.operands = (copy.result,)
            block.insert_op_before(bcast, op)
            copy = bcast
        uses[op.dest] -= 1
        op.operands = (op.source, copy.result)
        uses[copy.result] = 1
        made += 1
    return made


def extern_view(v: SSAValue) -> tuple[SSAValue, list[Operation]]:
    """(source, the view ops from it out to v, in order): an extern (a numpy
    routine, a BLAS matmul) reads v as a numpy view of the source's buffer
    (`loop.extern` views: a stride-0 broadcast, a strided slice or
    transpose, a reshape) instead of a copy of v made by a kernel. The walk
    stops at a size symbol (a view's numpy arguments are plain sizes) and
    at the last source no bigger than v (a slice of a computed value is not
    worth computing all of that value for), unless the source is an
    argument (its buffer is there already) or read by other ops too (its
    slices in a loop: computed once, each read where it lies, instead of
    each slice computing its part again)."""
    chain: list[Operation] = []
    while (isinstance(v.owner, (A.BroadcastOp, A.TransposeOp, A.SliceOp, A.ReshapeOp))
           and not symbols_of([v.type, v.owner.operands[0].type, list(v.owner.properties.values())])):
        chain.append(v.owner)
        v = v.owner.operands[0]
    chain.reverse()
    size = _size(chain[-1].results[0]) if chain else 0
    while (chain and not isinstance(v, BlockArgument) and _size(v) > size
           and len(set(u.operation for u in v.uses)) < 2):
        v = chain.pop(0).results[0]
    return v, chain


def _blas_transpose(op: Operation) -> bool:
    perm = A.ints(op.permutation) if isinstance(op, A.TransposeOp) else ()
    r = len(perm)
    return r >= 2 and perm == (*range(r - 2), r - 1, r - 2)


def blas_operand(v: SSAValue) -> tuple[SSAValue, bool]:
    """(what BLAS reads, transposed?) for a matmul operand: the input of a
    transpose of the last two dims, read transposed, instead of a copy."""
    op = v.owner
    if isinstance(op, A.TransposeOp):
        perm = A.ints(op.permutation)
        r = len(perm)
        if r >= 2 and perm == (*range(r - 2), r - 1, r - 2):
            return op.input, True
    return v, False


def dot_operands(op: A.DotOp) -> list[tuple[SSAValue, bool]]:
    """What the device library reads for each operand of a matmul it runs,
    and whether it reads it transposed."""
    ops = [blas_operand(o) for o in op.operands]
    return narrow_operands(ops) if _HALF_KERNELS.get() else ops


def narrow_operands(ops: list[tuple[SSAValue, bool]]) -> list[tuple[SSAValue, bool]]:
    """A float32 matmul of float16 or bfloat16 values widened to float32
    (numpy's `a @ b` of two bfloat16 arrays): the device library reads the
    narrow values and writes float32, the widening copies never made. The
    products are exact in float32 either way and summed in float32."""
    narrow = []
    for src, t in ops:
        cast = src.owner
        if not (isinstance(cast, A.CastOp) and _wide_of_half(cast)):
            return ops
        inner, t2 = blas_operand(cast.input)
        narrow.append((inner, t != t2))
    if narrow[0][0].type.element_type != narrow[1][0].type.element_type:
        return ops
    return narrow


def rounded_product(op: Operation) -> A.CastOp | None:
    """On the GPU: the cast rounding a float32 matmul of narrow operands
    (`narrow_operands`: numpy's `(a @ b).astype(bfloat16)` of two bfloat16
    arrays) back to their type, where it is the product's only use. The
    device library then writes the narrow result itself: its float32 sums
    rounded once to the narrow type, as the cast rounds numpy's (the sums'
    order is the library's either way); the float32 product is never made."""
    if not (_HALF_KERNELS.get() and isinstance(op, A.DotOp)) or generated(op):
        return None
    (a, _), _ = ops = dot_operands(op)
    narrow = a.type.element_type
    if not _is_half(narrow) or any(o.type.element_type != narrow for o, _ in ops):
        return None
    uses = list(op.result.uses)
    if len(uses) != 1:
        return None
    cast = uses[0].operation
    if not isinstance(cast, A.CastOp) or cast.result.type.element_type != narrow:
        return None
    return cast


def _wide_of_half(cast: A.CastOp) -> bool:
    from xdsl.dialects.builtin import Float32Type

    return _is_half(cast.input.type.element_type) and \
        isinstance(cast.result.type.element_type, Float32Type)


class KernelEmitter:
    """Builds the `loop.kernel` computing one realized value."""

    def __init__(self, lw: Lowering, root: SSAValue, buf: SSAValue):
        self.lw, self.root, self.buf = lw, root, buf
        self.target = root  # the value whose points the kernel stores
        self.reducing: list[int] | None = None  # a reduction's body being built: its dims' extents
        self.extents: tuple = ()  # the extents of the kernel's dims (where `emit` knows them)

    # phase 1: which reductions does the root need, at which index?
    def _collect(self, v: SSAValue, idx: Index, found: list, seen: set) -> None:
        """Depth-first from (v, idx), operands in order; a reduction is
        appended to `found` after the reductions it needs. Iterative (an
        explicit stack): a chain of thousands of fused ops is one walk, not
        thousands of nested calls."""
        stack: list[tuple[SSAValue, Index, bool]] = [(v, idx, False)]
        while stack:
            v, idx, done = stack.pop()
            if done:  # a reduction whose operands have all been walked
                found.append((v, idx))
                continue
            key = (v, tuple(map(str, idx)))
            if key in seen:
                continue
            seen.add(key)
            if v in self.lw.realized and v is not self.root:
                continue
            op = v.owner
            if isinstance(v, BlockArgument):
                continue
            if isinstance(op, (A.ReduceOp, A.ArgReduceOp)):
                stack.append((v, idx, True))
                todo = self._reduce_operand_index(op, idx, None)
            elif isinstance(op, A.DotOp):  # its operands are realized
                continue
            elif isinstance(op, A.GatherOp):  # the input at a data-dependent index
                ax, r = op.axis.value.data, op.indices.type.get_num_dims()
                todo = [(op.indices, idx[ax:ax + r]),
                        (op.input, (*idx[:ax], dim(DATA_DIM), *idx[ax + r:]))]
            elif is_view(op):
                todo = [(op.operands[0], through_view(op, idx))]
            else:
                todo = [(o, idx) for o in op.operands]
            stack.extend((o, i, False) for o, i in reversed(todo))

    def _reduce_operand_index(self, op, idx: Index, first_dim: int | None):
        """Operand index of a reduction at output index idx; its reduced dims
        are d{first_dim}... (None: placeholders for analysis)."""
        x = op.input
        axes = A.ints(op.axes) if isinstance(op, A.ReduceOp) else (op.axis.value.data,)
        out, it, k = [], iter(idx), 0
        for d in range(x.type.get_num_dims()):
            if d in axes:
                out.append(dim(first_dim + k) if first_dim is not None else dim(1000 + k))
                k += 1
            else:
                out.append(next(it))
        return [(x, tuple(out))]

    def emit(self) -> None:
        lw, root = self.lw, self.target
        shape = root.type.get_shape()
        self.extents = tuple(shape)
        n = len(shape)
        found: list = []
        at = self.point(shape)
        self._collect(root, at, found, set())
        fine = None if found or at != tuple(dim(i) for i in range(n)) else merged_source(root)
        if fine is not None:  # (its points in its source's order: no division)
            self._emit_over(fine, shape)
            return
        reductions = []
        p = None
        for v, idx in found:
            if v is root:  # the kernel's rows are the root reduction's
                p = is_prefix(idx)
        for v, idx in found:
            k = is_prefix(idx)
            if k is None:
                at = ", ".join(map(str, idx)).replace(f"d{DATA_DIM}", "gathered")
                raise Restart(v, f"{v.owner.name} is realized: its consumer reads it at "
                                 f"({at}), not once per row")
            if p is None:
                p = k
            elif k != p:
                raise Restart(v, f"{v.owner.name} is realized: rows of {k} dims do not match "
                                 f"the kernel's {p}")
            reductions.append(v)
        if p is None:
            p = max(n - 1, 0)
        lw.kernels += 1
        self.k = L.KernelOp(f"k{lw.kernels}", [], shape[:p])
        self.p = p
        self.kblock = self.k.body.block
        self.kmemo: dict = {}
        self.used_buffers: list[SSAValue] = []
        self.fused: list[str] = []
        pidx = tuple(dim(i) for i in range(p))
        for v in dict.fromkeys(reductions):
            self.kmemo[(v, tuple(map(str, pidx)))] = self._emit_reduce(v.owner, pidx)
        if p == n:
            self.block, self.dims, self.memo = self.kblock, list(self.kblock.args), {}
            pidx = self.point(shape)
            val = self.value_at(root, pidx)
            self._store(val, pidx)
        else:
            m = L.MapOp(shape[p:])
            self.kblock.add_op(m)
            mb = m.body.block
            self.block, self.dims, self.memo = mb, list(self.kblock.args) + list(mb.args), {}
            full = self.point(shape)
            val = self.value_at(root, full)
            self._store(val, full)
            mb.add_op(L.YieldOp())
        self.kblock.add_op(L.YieldOp())
        for r in reductions:
            d = describe(r.owner)
            if d not in self.fused:
                self.fused.append(d)
        if not self.fused and isinstance(root.owner, Operation):  # a view made a buffer
            self.fused.append(f"{describe(root.owner)} (copied)")
        lw.kernel_ops.append((self.k.sym_name.data, self.fused))
        k = self.k.with_buffers(list(dict.fromkeys(self.used_buffers + [self.buf])))
        k.attributes.update(self.attributes())
        lw.out.add_op(k)

    def point(self, shape) -> Index:
        """The index the kernel computes and stores at its point (d0, d1, ...)."""
        return tuple(dim(i) for i in range(len(shape)))

    def attributes(self) -> dict:
        """Attributes the kernel carries beyond its domain and buffers."""
        return {}

    def _region(self, idx: Index) -> tuple | None:
        """The box (`_box`'s form) of the points idx reaches over the
        kernel's domain (`extents`, its first dims), where each index is
        a sum of those dims times constants plus a constant; else None."""
        extents = self.extents if self.reducing is None else tuple(self.reducing)
        box = []
        for e in idx:
            span = _span(e, extents)
            if span is None:
                return None
            box.append((span[0], 1, span[1] - span[0] + 1))
        return tuple(box)

    def _store(self, val: SSAValue, idx: Index) -> None:
        m = AffineMap(len(self.dims), 0, self.stored_at(idx))
        self.block.add_op(L.StoreOp(val, self.buf, self.dims, m))

    def _emit_over(self, src: SSAValue, shape: tuple[int, ...]) -> None:
        """The target, a reshape merging dims of `src` (`merged_source`),
        computed over src's domain and stored at the merged index: loads
        and stores both affine (over the target's own domain every load of
        src would divide its flat index by src's dims)."""
        fshape = src.type.get_shape()
        self.extents = tuple(fshape)
        n = len(fshape)
        p = max(n - 1, 0)
        self.lw.kernels += 1
        self.k = L.KernelOp(f"k{self.lw.kernels}", [], fshape[:p])
        self.p = p
        self.kblock = self.k.body.block
        self.kmemo, self.used_buffers, self.fused = {}, [], []
        full = tuple(dim(i) for i in range(n))
        if p == n:
            self.block, self.dims, self.memo = self.kblock, list(self.kblock.args), {}
        else:
            m = L.MapOp(fshape[p:])
            self.kblock.add_op(m)
            self.block = m.body.block
            self.dims, self.memo = list(self.kblock.args) + list(self.block.args), {}
        val = self.value_at(src, full)
        self._store(val, reshape_index(shape, fshape, full))
        if p < n:
            self.block.add_op(L.YieldOp())
        self.kblock.add_op(L.YieldOp())
        if not self.fused:
            self.fused.append(f"{describe(self.target.owner)} (copied)")
        self.lw.kernel_ops.append((self.k.sym_name.data, self.fused))
        self.lw.out.add_op(self.k.with_buffers(list(dict.fromkeys(self.used_buffers + [self.buf]))))

    def stored_at(self, idx: Index) -> Index:
        return idx

    def _emit_reduce(self, op, pidx: Index) -> SSAValue:
        x = op.input
        axes = A.ints(op.axes) if isinstance(op, A.ReduceOp) else (op.axis.value.data,)
        ranges = [x.type.get_shape()[a] for a in axes]
        kind = op.kind.data
        el = x.type.element_type
        rtype = i64 if kind in ("argmax", "argmin") else el
        r = L.ReduceOp(kind, ranges, rtype)
        self.kblock.add_op(r)
        rb = r.body.block
        saved = getattr(self, "block", None), getattr(self, "dims", None), getattr(self, "memo", None)
        self.block, self.dims, self.memo = rb, list(self.kblock.args) + list(rb.args), {}
        self.reducing = [*A.ints(self.k.parallel), *ranges]  # (see `_carry`)
        (_, xi), = self._reduce_operand_index(op, pidx, self.p)
        v = self.value_at(x, xi)
        rb.add_op(L.YieldOp(v))
        self.block, self.dims, self.memo = saved
        self.reducing = None
        return r.result

    # phase 2: scalar code for v at idx in the current region
    def value_at(self, v: SSAValue, idx: Index) -> SSAValue:
        """The scalar value of v at idx, its operands' code emitted first.
        `_value_steps` asks for operand values by yielding them; this loop
        answers from the memo or runs the operand's own steps on an explicit
        stack, so a chain of thousands of fused ops nests no Python calls."""
        hit = self._memo_hit(v, idx)
        if hit is not None:
            return hit
        stack = [self._value_steps(v, idx)]
        res: SSAValue | None = None
        while stack:
            try:
                ask = stack[-1].send(res)
            except StopIteration as done:
                stack.pop()
                res = done.value
                continue
            res = self._memo_hit(*ask)
            if res is None:
                stack.append(self._value_steps(*ask))
        assert res is not None
        return res

    def _memo_hit(self, v: SSAValue, idx: Index) -> SSAValue | None:
        key = (v, tuple(map(str, idx)))
        return self.memo.get(key) or self.kmemo.get(key)

    def _value_steps(self, v: SSAValue, idx: Index):
        """Generator: yields (operand, index) for each operand value it needs
        (sent back by `value_at`), emits v's code and returns its value."""
        res = yield from self._value_at(v, idx)
        self.memo[(v, tuple(map(str, idx)))] = res
        op = v.owner
        if (isinstance(op, Operation) and not (v in self.lw.buffer and v is not self.root
                                               and self.lw.carried.get(v) is not self)
                and not is_view(op) and not isinstance(op, A.ConstantOp)):
            d = describe(op)
            if d not in self.fused:
                self.fused.append(d)
        return res

    def _emit(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def _value_at(self, v: SSAValue, idx: Index):
        """Generator (see `_value_steps`): `yield (o, i)` is the value of o at i."""
        lw = self.lw
        if v is not self.root and (v in lw.pending or lw.carried.get(v) is self):
            return (yield from self._carry(v, idx))
        if v in lw.buffer and (v in lw.realized or isinstance(v, BlockArgument)) and v is not self.root:
            buf = lw.read(v, self._region(idx))
            self.used_buffers.append(buf)
            return self._emit(L.LoadOp(buf, self.dims, AffineMap(len(self.dims), 0, idx)))
        if isinstance(v.owner, A.SliceOp) and lw.untouched(v.owner):
            buf = lw.buffer[v.owner.input]  # (written over elsewhere only)
            self.used_buffers.append(buf)
            at = through_view(v.owner, idx)
            return self._emit(L.LoadOp(buf, self.dims, AffineMap(len(self.dims), 0, at)))
        return (yield from self._compute(v, idx))

    def _carry(self, v: SSAValue, idx: Index):
        """A deferred value (`Lowering.deferrable`) met in this kernel: inside
        a reduction's body that visits each of its points exactly once, it is
        computed here and stored; anywhere else (or a second time in this
        kernel, which would read points not stored yet) lowering restarts
        with v given its own kernel."""
        lw = self.lw
        if v in lw.pending and self._covers(v, idx):
            lw.pending.discard(v)
            lw.carried[v] = self
            val = yield from self._compute(v, idx)
            buf = lw.buffer[v]
            self.used_buffers.append(buf)
            self.block.add_op(L.StoreOp(val, buf, self.dims, AffineMap(len(self.dims), 0, idx)))
            return val
        raise Restart(v, "", undefer=True)

    def _covers(self, v: SSAValue, idx: Index) -> bool:
        """idx names every dim of the reduction body being built, once each,
        over v's own extents: the body's points are v's points, one to one."""
        ranges = self.reducing
        shape = v.type.get_shape()
        if ranges is None or not (len(idx) == len(self.dims) == len(ranges) == len(shape)):
            return False
        used = set()
        for e, n in zip(idx, shape):
            s = str(e)
            if not (s.startswith("d") and s[1:].isdigit()) or int(s[1:]) in used:
                return False
            j = int(s[1:])
            if j >= len(ranges) or ranges[j] != n:
                return False
            used.add(j)
        return True

    def _compute(self, v: SSAValue, idx: Index):
        """Generator: v's own scalar code at idx (its operands asked for)."""
        op = v.owner
        if isinstance(op, (A.ReduceOp, A.ArgReduceOp)):
            raise Restart(v, f"{op.name} is realized: needed inside another loop")
        if is_view(op):
            return (yield (op.operands[0], through_view(op, idx)))
        el = v.type.element_type
        if isinstance(op, A.ConstantOp):
            return self._emit(L.ConstOp(op.value.data, el))
        if isinstance(op, A.DotOp):
            # a short contraction, in order, fused multiply-adds from +0.0 as
            # BLAS does, then + 0.0 (a sum of -0.0 products, or of products
            # that underflow to -0.0, is +0.0, as BLAS's sum into a zeroed
            # output): sum_k a[i, k] b[k, j]
            i, j = idx[-2], idx[-1]
            zero = acc = self._emit(L.ConstOp("0.0", el))
            for k in range(op.lhs.type.get_shape()[-1]):
                a = yield (op.lhs, (i, const(k)))
                b = yield (op.rhs, (const(k), j))
                acc = self._emit(math.FmaOp(a, b, acc))
            return self._emit(arith.AddfOp(acc, zero))
        if isinstance(op, A.GatherOp):
            # the index value becomes one more dim of this region's loads
            ax, r = op.axis.value.data, op.indices.type.get_num_dims()
            j = self._data_dim((yield (op.indices, idx[ax:ax + r])), op.input, ax)
            return (yield (op.input, (*idx[:ax], j, *idx[ax + r:])))
        if isinstance(op, A.IotaOp):
            d = op.dimension.value.data
            i = self._index_value(idx[d])
            c = self._emit(arith.IndexCastOp(i, i64))
            return c if el == i64 else self._emit(L.CastOp(c, el))
        args = []
        for o in op.operands:
            args.append((yield (o, idx)))
        if isinstance(op, A.UfuncOp):
            return self._emit(L.UfuncOp(op.fn.data, args, el))
        if isinstance(op, A.CastOp):
            return self._emit(L.CastOp(args[0], el))
        if isinstance(op, A.SelectOp):
            return self._emit(arith.SelectOp(*args))
        if isinstance(op, A.CompareOp):
            return self._emit(compare(op.predicate.data, args[0], args[1]))
        # upstream arith/math: the same op on scalars
        new = type(op).create(operands=args, result_types=[el], properties=dict(op.properties))
        return self._emit(new)

    def _data_dim(self, i: SSAValue, of: SSAValue, axis: int) -> AffineExpr:
        """The integer value i as an index along `axis` of `of` (checked and
        normalized by `loop.index`): one more dim of this region's accesses."""
        self.dims.append(self._emit(L.IndexOp(i, of.type.get_shape()[axis], axis)))
        return dim(len(self.dims) - 1)

    def _index_value(self, e: AffineExpr) -> SSAValue:
        """An index-typed SSA value for an affine expression of the dims."""
        m = AffineMap(len(self.dims), 0, (e,))
        s = str(e)
        if s.startswith("d") and s[1:].isdigit():
            return self.dims[int(s[1:])]
        from xdsl.dialects import affine

        from xdsl.dialects.builtin import AffineMapAttr

        return self._emit(affine.ApplyOp(self.dims, AffineMapAttr(m)))


def read_apart(v: SSAValue) -> bool:
    """v is read only through windows that share no element (a value
    assignments split: `canonicalize.ReadInsideWindow`): computed where
    each is read, each element is computed once."""
    boxes = []
    for u in v.uses:
        op = u.operation
        if not isinstance(op, A.SliceOp):
            return False
        b = _box(A.ints(op.start), A.ints(op.step), op.result.type.get_shape())
        if b is None or not all(_disjoint(b, o) for o in boxes):
            return False
        boxes.append(b)
    return len(boxes) >= 2


def concat_in_kernels(op: Operation) -> bool:
    """A concatenation of static shapes in a type kernels compute (not
    float16, not complex) is one kernel per piece writing it at its offset
    (`np.roll`, `np.concatenate`, `np.stack`: each piece's expression fused
    in, views read where they lie), not a numpy routine."""
    return (isinstance(op, A.ConcatOp) and not _half(op.result)
            and not isinstance(op.result.type.element_type, ComplexType)
            and not symbols_of([o.type for o in (*op.inputs, op.result)]))


class ConcatEmitter(KernelEmitter):
    """A piece of a concatenation (`concat_in_kernels`, through nested
    ones: `Lowering.concat_leaves`), stored at its offset `at` (per dim)."""

    def __init__(self, lw: Lowering, root: SSAValue, buf: SSAValue, piece: SSAValue,
                 at: tuple[int, ...]):
        super().__init__(lw, root, buf)
        self.target, self.at = piece, at

    def stored_at(self, idx: Index) -> Index:
        return tuple(e + a if a else e for e, a in zip(idx, self.at))

    def emit(self) -> None:
        super().emit()
        _, fused = self.lw.kernel_ops[-1]
        fused.append(describe(self.root.owner))


class CopyEmitter(KernelEmitter):
    """The destination of a slice assignment copied into the result's
    buffer (`Lowering.write_mode` "copy"; its expression fused in): an
    `InsertEmitter` then writes the window."""

    def __init__(self, lw: Lowering, root: SSAValue, buf: SSAValue):
        super().__init__(lw, root, buf)
        self.target = root.owner.dest


def reversed_transpose(v: SSAValue) -> A.TransposeOp:
    """v's transpose with its dims reversed (an F-ordered argument's memory
    order: `Lowering.memory_order`, `Lowering.transposed_source`), not yet
    placed in a block."""
    shape = v.type.get_shape()
    return A.TransposeOp(v, tuple(reversed(range(len(shape)))),
                         TensorType(v.type.element_type, list(reversed(shape))))


class MemoryOrderEmitter(KernelEmitter):
    """A result written into an F-ordered argument (`Lowering.memory_order`):
    the kernel runs over its transpose's points — the argument's memory
    order, its innermost loop over unit strides — and stores each at the
    result's own index."""

    def __init__(self, lw: Lowering, root: SSAValue, buf: SSAValue, transposed: SSAValue):
        super().__init__(lw, root, buf)
        self.target = transposed

    def stored_at(self, idx: Index) -> Index:
        return tuple(reversed(idx))


class InsertEmitter(KernelEmitter):
    """`dest[window] = source` in dest's buffer (see `in_place`): a kernel
    over the source's domain, the source's expression fused in, storing at
    start + step * index."""

    def __init__(self, lw: Lowering, root: SSAValue, buf: SSAValue):
        super().__init__(lw, root, buf)
        op = root.owner
        self.target = op.source
        self.window = list(zip(A.ints(op.start), A.ints(op.step)))
        self.unit_dims: tuple | None = None
        src = op.source.owner
        if (isinstance(src, A.ReshapeOp) and not isinstance(src.input, BlockArgument)
                and src.input not in lw.buffer and src.input not in lw.realized
                and _squeezed(src.input.type.get_shape()) == _squeezed(op.source.type.get_shape())
                and not symbols_of([src.input.type, op.source.type])):
            # a value given unit dims for the window (`out[t] = x.argmax(axis=1)`):
            # the kernel runs over the value's own dims, so that a reduction
            # in it is computed once per row of the kernel and stored straight
            # into the window, not realized and copied there
            self.target = src.input
            self.unit_dims = (op.source.type.get_shape(), src.input.type.get_shape())

        elif buf in lw.f_args and lw.write_mode(op) == "direct":
            # a window of an F-ordered argument written in place: the kernel
            # runs over the source's transpose's points (the argument's
            # memory order, its innermost loop over unit strides), each
            # stored at the window's point of the reversed index
            # (`MemoryOrderEmitter`'s walk, for a window)
            shape = op.source.type.get_shape()
            if len(shape) >= 2 and not symbols_of([op.source.type]):
                self.target = lw.transposed_source(op)
                self.reverse = True

    reverse = False

    def stored_at(self, idx: Index) -> Index:
        if self.reverse:
            idx = tuple(reversed(idx))
        if self.unit_dims is not None:
            idx = reshape_index(*self.unit_dims, idx)
        return tuple(const(a) + e * c for e, (a, c) in zip(idx, self.window))

    def point(self, shape) -> Index:
        """An "ordered" assignment (`slice_write`) walks the dims it names
        backwards: point d computes and stores at n - 1 - d there."""
        idx = super().point(shape)
        if self.lw.write_mode(self.root.owner) != "ordered":
            return idx
        backwards = self.lw.backwards[self.root.owner]
        big = [i for i, n in enumerate(shape) if n != 1]
        return tuple(const(shape[i] - 1) - e if i in big and big.index(i) in backwards else e
                     for i, e in enumerate(idx))

    def attributes(self) -> dict:
        # its points run in order, on one thread (as a scan's)
        return {"accumulate": UnitAttr()} if self.lw.write_mode(self.root.owner) == "ordered" else {}

    def emit(self) -> None:
        super().emit()
        _, fused = self.lw.kernel_ops[-1]
        fused.append(describe(self.root.owner))


class _OrderedEmitter(KernelEmitter):
    """Kernels built step by step (`_open`, body, `_close`): a map over the
    dims after the first p, or none."""

    def _open(self, shape, p: int) -> None:
        self.lw.kernels += 1
        self.k = L.KernelOp(f"k{self.lw.kernels}", [], shape[:p])
        self.p = p
        self.kblock = self.k.body.block
        self.kmemo, self.used_buffers, self.fused = {}, [], []
        self.block, self.dims, self.memo = self.kblock, list(self.kblock.args), {}
        if p < len(shape):
            self.map = L.MapOp(shape[p:])
            self.kblock.add_op(self.map)
            self.block = self.map.body.block
            self.dims = self.dims + list(self.block.args)
        else:
            self.map = None

    def _close(self, attrs: dict) -> None:
        if self.map is not None:
            self.map.body.block.add_op(L.YieldOp())
        self.kblock.add_op(L.YieldOp())
        k = self.k.with_buffers(list(dict.fromkeys(self.used_buffers + [self.buf])))
        k.attributes.update(attrs)
        self.lw.kernel_ops.append((k.sym_name.data, self.fused))
        self.lw.out.add_op(k)

    def _close_chunks(self, n: int, partial: SSAValue, out: SSAValue, kept, out_idx,
                      combine, what: str, attrs: dict | None = None) -> None:
        """Close the kernel built so far as `k<i>_part` (`ordered_chunks` n:
        chunk c's rows, in order, into row c of `partial`; with `attrs`
        too), then build `k<i>_join`: a map over `kept` storing into `out`
        at `out_idx(point)` the n partials combined in chunk order
        (`combine(total, p)`)."""
        d = describe(self.root.owner)
        name = self.k.sym_name.data
        self.k.sym_name = StringAttr(f"{name}_part")
        self._close({"accumulate": UnitAttr(), "ordered_chunks": IntegerAttr(n, i64),
                     **(attrs or {})})
        self.buf = out
        self._open(kept, 0)
        self.k.sym_name = StringAttr(f"{name}_join")
        at = tuple(dim(i) for i in range(len(kept)))
        total = None
        for c in range(n):
            p = self._emit(L.LoadOp(partial, self.dims,
                                    AffineMap(len(self.dims), 0, (const(c), *at))))
            total = p if total is None else combine(total, p)
        self.used_buffers.append(partial)
        self._store(total, out_idx(at))
        self.fused.append(f"{d} (the {n} chunks' {what})")
        self._close({})

    def _combine(self, kind: str, acc: SSAValue, x: SSAValue) -> SSAValue:
        """acc + x or acc * x in the element type (bool: or / and)."""
        el = x.type
        if el == IntegerType(1):
            return self._emit((arith.OrIOp if kind == "sum" else arith.AndIOp)(acc, x))
        if isinstance(el, IntegerType):
            return self._emit((arith.AddiOp if kind == "sum" else arith.MuliOp)(acc, x))
        return self._emit((arith.AddfOp if kind == "sum" else arith.MulfOp)(acc, x))


class ColumnEmitter(_OrderedEmitter):
    """A reduction over the leading axes that keeps a long innermost axis
    (a bias gradient, `g.sum(axis=0)`) as one kernel over the input's domain:
    the reduced axes are its parallel dims, the kept ones its map, and each
    point combines into the output, `out[j] = 0 + x[0, j]` at the first row
    (numpy's start: its identity, or the first row for max/min) and
    `out[j] = out[j] + x[i, j]` after — numpy's own order for a C-contiguous
    input, so sums match it bit for bit (signed zeros included). Rows must run
    in order: the kernel carries `accumulate` and `schedule` keeps it on one
    thread. The input's expression is computed inline (fused) as in any
    kernel.

    A sum, max or min over one leading axis of many rows is split into n
    chunks of rows (`Lowering.column_chunks`: one per CPU thread from the
    parallel threshold on; on a GPU, enough for its programs): `k<i>_part`
    (`ordered_chunks` n) accumulates chunk c's rows, in order and from the
    same start, into row c of an (n, ...) buffer of partial results, and
    `k<i>_join` combines the n partials in chunk order. A sum's order then
    changes (within the reduction tolerances, as `split_reductions`'); max
    and min are exact; products are never split (their partials can
    overflow and underflow where numpy's one pass does not)."""

    def emit(self) -> None:
        op = self.root.owner
        x = op.input
        shape = x.type.get_shape()
        r = 1 if isinstance(op, A.ArgReduceOp) else len(A.ints(op.axes))
        self._open(shape, r)  # (a column reduction keeps its innermost axis: a map)
        val = self.value_at(x, tuple(dim(i) for i in range(len(shape))))
        out_idx = tuple(dim(i) for i in range(r, len(shape)))
        el = x.type.element_type
        kind = op.kind.data
        static = all(type(d) is int and d >= 0 for d in shape)
        m, k = (int(np.prod(shape[:r])), int(np.prod(shape[r:]))) if static else (0, 0)
        # (products stay in order: a split product's partials can overflow
        # and underflow where numpy's one pass does not, inf * 0 a NaN)
        # (float16/bfloat16 sums neither: numpy rounds every row's add to the
        # narrow type, and chunks restarting from 0 would sum another value)
        n = self.lw.column_chunks(m, k) if static and r == 1 and kind in ("sum", "max", "min") \
            and not (kind == "sum" and _is_half(el)) else 1
        out = self.buf
        if n > 1:  # row i is in chunk (n i + n - 1) floordiv m, first in it where that mod m < n
            partial = memref.AllocOp([], [], MemRefType(el, [n, *shape[r:]]))
            self.lw.out.add_op(partial)
            self.buf = partial.memref
            at = dim(0) * n + (n - 1)
            out_idx = (at // m, *out_idx)
            first = compare("lt", self._emit(arith.IndexCastOp(self._index_value(at % m), i64)),
                            self._emit(L.ConstOp(str(n), i64)))
        acc = self._emit(L.LoadOp(self.buf, self.dims, AffineMap(len(self.dims), 0, out_idx)))
        row = dim(0)
        for i in range(1, r):
            row = row * shape[i] + dim(i)
        if n == 1:
            first = compare("eq", self._emit(arith.IndexCastOp(self._index_value(row), i64)),
                            self._emit(L.ConstOp("0", i64)))
        # numpy starts a sum from +0.0 (a column of -0.0 sums to +0.0) and a
        # product from 1; max/min from the first row (max(x0, x0) = x0)
        init = val if kind in ("max", "min") else self._emit(
            L.ConstOp("0" if kind == "sum" else "1", el) if isinstance(el, IntegerType)
            else L.ConstOp("0.0" if kind == "sum" else "1.0", el))
        if kind in ("argmax", "argmin"):
            self._arg(kind, val, out_idx, first, row)
            return
        acc = self._emit(arith.SelectOp(self._emit(first), init, acc))
        if kind in ("max", "min"):
            new = self._emit(L.UfuncOp("maximum" if kind == "max" else "minimum", [acc, val], el))
        else:
            new = self._combine(kind, acc, val)
        self._store(new, out_idx)
        d = describe(op)
        if d not in self.fused:
            self.fused.append(d)
        if n == 1:
            self._close({"accumulate": UnitAttr()})
            return
        # each chunk's rows in order into its row of the partials, then the
        # join: out = partial[0] + ... + partial[n - 1], in chunk order
        if kind == "sum":
            def combine(t, p):
                return self._combine(kind, t, p)
        else:
            def combine(t, p):
                return self._emit(L.UfuncOp("maximum" if kind == "max" else "minimum", [t, p],
                                            el))
        self._close_chunks(n, partial.memref, out, shape[r:], lambda at: at, combine,
                           "partial results")

    def _arg(self, kind: str, val: SSAValue, out_idx: Index, first, row) -> None:
        """argmax/argmin down the rows: the extreme so far in a buffer of its
        own beside the output's indices; a row takes over where its value is
        strictly greater (less), or is the first NaN (numpy: the first
        occurrence of the extreme, a NaN the extreme)."""
        op = self.root.owner
        el = val.type
        best = memref.AllocOp([], [], MemRefType(el, memref_of(op.result.type).get_shape()))
        self.lw.out.add_op(best)
        m = AffineMap(len(self.dims), 0, out_idx)
        cur = self._emit(L.LoadOp(best.memref, self.dims, m))
        idx = self._emit(L.LoadOp(self.buf, self.dims, m))
        take = self._emit(compare("gt" if kind == "argmax" else "lt", val, cur))
        if not isinstance(el, IntegerType):  # the first NaN wins, and stays
            new_nan = self._emit(arith.AndIOp(self._emit(compare("ne", val, val)),
                                              self._emit(compare("eq", cur, cur))))
            take = self._emit(arith.OrIOp(take, new_nan))
        take = self._emit(arith.OrIOp(take, self._emit(first)))
        here = self._emit(arith.IndexCastOp(self._index_value(row), i64))
        self.block.add_op(L.StoreOp(self._emit(arith.SelectOp(take, val, cur)), best.memref,
                                    self.dims, m))
        self._store(self._emit(arith.SelectOp(take, here, idx)), out_idx)
        self.used_buffers.append(best.memref)
        d = describe(op)
        if d not in self.fused:
            self.fused.append(d)
        self._close({"accumulate": UnitAttr()})


class DotEmitter(_OrderedEmitter):
    """A narrow matmul (`narrow_dot`) as one kernel over the rows i: for each
    of the N columns j, `loop.reduce "sum"` over k of a[i, k] * bt[j, k]
    (bt: B's columns as rows), marked `contract` (the codegen folds each
    product in with a fused multiply-add, as BLAS does), and stored at
    (i, j). The N reductions share one pass over the row (the codegen's
    `reduction_groups`): each vector of a[i, :] is loaded once for all N."""

    def emit(self) -> None:
        lw, op = self.lw, self.root.owner
        (m, n), kk = op.result.type.get_shape(), op.lhs.type.get_shape()[1]
        el = op.result.type.element_type
        self._open((m,), 1)  # one point per row, no map
        for j in range(n):
            r = L.ReduceOp("sum", [kk], el)
            r.attributes["contract"] = UnitAttr()
            self.kblock.add_op(r)
            rb = r.body.block
            self.block, self.dims, self.memo = rb, list(self.kblock.args) + list(rb.args), {}
            a = self.value_at(op.lhs, (dim(0), dim(1)))
            if op in lw.columns:
                b = self.value_at(lw.columns[op], (const(j), dim(1)))
            else:
                b = self.value_at(op.rhs, (dim(1), const(j)))
            rb.add_op(L.YieldOp(self._emit(arith.MulfOp(a, b))))
            self.block, self.dims, self.memo = self.kblock, list(self.kblock.args), {}
            self._store(r.result, (dim(0), const(j)))
        d = describe(op)
        if d not in self.fused:
            self.fused.append(d)
        self._close({})


class SharedRowsEmitter(_OrderedEmitter):
    """A matrix-vector product contracting over the rows of a matrix A
    (`A.T @ v` or `v @ A`, `rows_contracted`) together with the row
    products its vector needs (`row_products`), as one kernel over A's rows
    i: each row product's column j as `loop.reduce "sum"` over k of
    a[i, k] * w[k, j] (marked `contract`, as `DotEmitter`'s), then v[i] from
    them (the point-wise ops between, once per row), then a map over A's
    row adding a[i, k] * v[i] into out[k] (`ColumnEmitter`'s accumulation:
    +0.0 at the first row, rows in order — `accumulate`). A is read from
    memory once; the map re-reads the row the reductions just read, from
    cache. A point takes a block of rows (`shared_row_block`: up to
    SHARED_LONG_ROW_BLOCK rows, SHARED_BLOCK_BYTES together): the rows' products
    are independent reductions (one pass, `reduction_groups`), and the map
    adds the rows into out[k] one after the other, in order, with one load
    and one store of it.

    On one thread, that is the kernel. On n threads (`row_chunks`) the rows
    run in n chunks, chunk c the rows [M c // n, M (c + 1) // n) — the points
    the CPU launch gives its thread c of n (`runtime.cpu.launch`): the kernel
    (`k<i>_part`, `ordered_chunks` n) adds each chunk's rows, in order, into
    its own row c of an (n, K) buffer of partial results, from +0.0 at the
    chunk's first row; `schedule` runs it on n threads, a divisor of n, or
    one — never splitting a chunk. Then `k<i>_join` adds the n partials, in
    chunk order, into the output. The sum's order changes (chunk by chunk,
    then the chunks' totals), as in `split_reductions`: within the
    reduction tolerances."""

    def emit(self) -> None:
        lw, op = self.lw, self.root.owner
        a, vec, axis = rows_contracted(op)
        m, k = a.type.get_shape()
        el = op.result.type.element_type
        shared = lw.shared[op]
        r_ = shared_row_block(m, k * from_ir(el).itemsize, shared)
        mb = m // r_  # the kernel's points: blocks of r_ rows
        n = lw.row_chunks(mb, k * r_)
        out = self.buf
        if n > 1:
            partial = memref.AllocOp([], [], MemRefType(el, [n, k]))
            lw.out.add_op(partial)
            self.buf = partial.memref
        self._open((mb,), 1)  # one point per block of rows; its map comes after the rows' values
        rows = [dim(0) * r_ + r for r in range(r_)] if r_ > 1 else [dim(0)]
        for row in rows:
            for z, idx in shared.products:
                at_row = (row, idx[1])
                key = (z.result, tuple(map(str, at_row)))
                if key in self.kmemo:
                    continue
                r = L.ReduceOp("sum", [k], el)
                r.attributes["contract"] = UnitAttr()
                self.kblock.add_op(r)
                rb = r.body.block
                self.block, self.dims, self.memo = rb, list(self.kblock.args) + list(rb.args), {}
                x = self.value_at(a, (row, dim(1)))
                if z in lw.columns:
                    w = self.value_at(lw.columns[z], (idx[1], dim(1)))
                else:
                    w = self.value_at(z.rhs, (dim(1), idx[1]))
                rb.add_op(L.YieldOp(self._emit(arith.MulfOp(x, w))))
                self.kmemo[key] = r.result
                if describe(z) not in self.fused:
                    self.fused.append(describe(z))
        self.block, self.dims, self.memo = self.kblock, list(self.kblock.args), {}
        if r_ > 1 and vector_rows(k * from_ir(el).itemsize, shared.row_ops):
            vis = self._row_values_as_vector(a, vec, axis, rows, r_)
        else:
            vis = [self.value_at(vec, (row, const(0)) if axis == 0 else (const(0), row))
                   for row in rows]
        # block i is in chunk (n i + n - 1) floordiv mb, and first in it where
        # (n i + n - 1) mod mb < n (for n <= mb)
        at = dim(0) * n + (n - 1)
        if n > 1:
            first = compare("lt", self._emit(arith.IndexCastOp(self._index_value(at % mb), i64)),
                            self._emit(L.ConstOp(str(n), i64)))
        else:
            first = compare("eq", self._emit(arith.IndexCastOp(self.dims[0], i64)),
                            self._emit(L.ConstOp("0", i64)))
        first = self._emit(first)
        zero = self._emit(L.ConstOp("0.0", el))
        self.map = L.MapOp([k])
        self.kblock.add_op(self.map)
        self.block = self.map.body.block
        self.dims, self.memo = list(self.kblock.args) + list(self.block.args), {}
        if n > 1:
            out_idx = (at // mb, dim(1))
        else:
            out_idx = (dim(1), const(0)) if axis == 0 else (const(0), dim(1))
        acc = self._emit(L.LoadOp(self.buf, self.dims, AffineMap(2, 0, out_idx)))
        acc = self._emit(arith.SelectOp(first, zero, acc))
        for row, vi in zip(rows, vis):  # (the rows in order, as one row per point adds them)
            x = self.value_at(a, (row, dim(1)))
            acc = self._emit(arith.AddfOp(acc, self._emit(arith.MulfOp(x, vi))))
        self._store(acc, out_idx)
        d = describe(op)
        if d not in self.fused:
            self.fused.append(d)
        if n == 1:
            self._close({"accumulate": UnitAttr(), "shared_rows": UnitAttr()})
            return
        # the join: out[j] = partial[0, j] + ... + partial[n - 1, j]
        self._close_chunks(n, partial.memref, out, (k,),
                           lambda at: (*at, const(0)) if axis == 0 else (const(0), *at),
                           lambda t, p: self._emit(arith.AddfOp(t, p)), "partial sums",
                           {"shared_rows": UnitAttr()})

    def _row_values_as_vector(self, a: SSAValue, vec: SSAValue, axis: int, rows: list,
                              r_: int) -> list[SSAValue]:
        """The vector's elements at the block's rows computed side by side: the
        rows' products stored into a scratch buffer (M, P), then a map over
        the block's r_ rows (`any_width`: vectorized across them, however
        few) computes the values between from them into a buffer (M,), which
        the rows' map reads back one scalar each. One row at a time, the
        values between (an exp and a division for a logistic gradient) ran
        scalar, with their floating-point checks: most of the pass's time
        on narrow rows."""
        shared = self.lw.shared[self.root.owner]
        m = a.type.get_shape()[0]
        el = vec.type.element_type
        # (product, its column's index as text: the memo keys) -> its column of the scratch
        cols = {key: p for p, key in enumerate(dict.fromkeys(
            (z, str(idx[1])) for z, idx in shared.products))}
        scratch = memref.AllocOp([], [], MemRefType(el, [m, len(cols)]))
        values = memref.AllocOp([], [], MemRefType(el, [m]))
        self.lw.out.add_op(scratch)
        self.lw.out.add_op(values)
        for row in rows:  # each row's products, as the reductions left them
            for (z, col), p in cols.items():
                self.kblock.add_op(L.StoreOp(self.kmemo[(z.result, (str(row), col))],
                                             scratch.memref, self.dims,
                                             AffineMap(1, 0, (row, const(p)))))
        block_map = L.MapOp([r_])
        block_map.attributes["any_width"] = UnitAttr()
        self.kblock.add_op(block_map)
        self.block = block_map.body.block
        self.dims, self.memo = list(self.kblock.args) + list(self.block.args), {}
        row = dim(0) * r_ + dim(1)
        for (z, col), p in cols.items():
            self.memo[(z.result, (str(row), col))] = self._emit(L.LoadOp(
                scratch.memref, self.dims, AffineMap(2, 0, (row, const(p)))))
        v = self.value_at(vec, (row, const(0)) if axis == 0 else (const(0), row))
        self.block.add_op(L.StoreOp(v, values.memref, self.dims, AffineMap(2, 0, (row,))))
        self.block.add_op(L.YieldOp())
        self.used_buffers += [scratch.memref, values.memref]
        self.block, self.dims, self.memo = self.kblock, list(self.kblock.args), {}
        return [self._emit(L.LoadOp(values.memref, self.dims, AffineMap(1, 0, (r,))))
                for r in rows]


class ScanEmitter(_OrderedEmitter):
    """An inclusive scan (`cumsum`, `cumprod`, `maximum.accumulate`, ...)
    along axis a as one kernel over
    the input's domain: parallel dims up to a, a map over the rest (vectorized
    across them), `out[.., i, ..] = out[.., i-1, ..] + x[.., i, ..]` and the
    first element copied — numpy's `add.accumulate`, in its order, so the
    values are numpy's bit for bit. The points run in order (`accumulate`:
    one thread). The previous element is read at `(i + n - 1) mod n`, a valid
    index even at i = 0, where the select keeps x. Along the last axis each
    point is one element, and the point before stored it: the load is marked
    `previous_point`, and the CPU emitter carries that value in a register
    from one point to the next instead of reading it back from memory (the
    sum's chain is then the add alone: numpy's own loop reloads it)."""

    def emit(self) -> None:
        op = self.root.owner
        shape = op.input.type.get_shape()
        a, kind = op.axis.value.data, op.kind.data
        self._open(shape, a + 1)
        idx = tuple(dim(i) for i in range(len(shape)))
        x = self.value_at(op.input, idx)
        n = shape[a]
        prev_idx = (*idx[:a], (dim(a) + (n - 1)) % n, *idx[a + 1:])
        load = L.LoadOp(self.buf, self.dims, AffineMap(len(self.dims), 0, prev_idx))
        if a == len(shape) - 1:  # (each point one element: the previous point stored prev)
            load.attributes["previous_point"] = UnitAttr()
        prev = self._emit(load)
        first = compare("eq", self._emit(arith.IndexCastOp(self._index_value(dim(a)), i64)),
                        self._emit(L.ConstOp("0", i64)))
        if kind in ("max", "min"):  # numpy's maximum/minimum: a NaN propagates
            step = self._emit(L.UfuncOp("maximum" if kind == "max" else "minimum", [prev, x],
                                        x.type))
        else:
            step = self._combine(kind, prev, x)
        val = self._emit(arith.SelectOp(self._emit(first), x, step))
        self._store(val, idx)
        d = describe(op)
        if d not in self.fused:
            self.fused.append(d)
        self._close({"accumulate": UnitAttr()})


class ScatterEmitter(_OrderedEmitter):
    """`dest[(:,)*axis, idx] = updates` (mode "set") or `np.add.at` (mode
    "add") as two kernels: the first copies dest (its expression fused) into
    the result, the second runs over the updates' points in row-major order
    and stores each at its checked index (`loop.index`), or adds it to what is
    there. Points must run in order, so that the last of duplicate indices
    wins and every addition lands: the second kernel carries `accumulate`
    (one thread) and, for "add", `scatter_add` (one element at a time)."""

    def emit(self) -> None:
        op = self.root.owner
        full = lambda n: tuple(dim(i) for i in range(n))  # noqa: E731
        # 1: the copy
        shape = op.dest.type.get_shape()
        self._open(shape, len(shape) - 1 if shape else 0)
        self._store(self.value_at(op.dest, full(len(shape))), full(len(shape)))
        self.fused.append(f"{describe(op)} (its destination)")
        self._close({})
        # 2: the updates, in order
        ushape = op.updates.type.get_shape()
        self._open(ushape, len(ushape) - 1 if ushape else 0)
        u = full(len(ushape))
        ax, r = op.axis.value.data, op.indices.type.get_num_dims()
        val = self.value_at(op.updates, u)
        j = self._data_dim(self.value_at(op.indices, u[ax:ax + r]), op.dest, ax)
        at = (*u[:ax], j, *u[ax + r:])
        attrs = {"accumulate": UnitAttr()}
        if op.mode.data == "add":
            old = self._emit(L.LoadOp(self.buf, self.dims, AffineMap(len(self.dims), 0, at)))
            val = self._combine("sum", old, val)
            attrs["scatter_add"] = UnitAttr()
        self._store(val, at)
        d = describe(op)
        if d not in self.fused:
            self.fused.append(d)
        self._close(attrs)


_FPRED = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
_SPRED = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
_UPRED = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}


def compare(pred: str, a: SSAValue, b: SSAValue) -> Operation:
    t = a.type
    if isinstance(t, IntegerType):
        unsigned = t.width.data == 1 or t.signedness.data == Signedness.UNSIGNED
        return arith.CmpiOp(a, b, (_UPRED if unsigned else _SPRED)[pred])
    return arith.CmpfOp(a, b, _FPRED[pred])


@dataclass(frozen=True)
class AnnotateLayouts(ModulePass):
    """Each argument of the (first) function gets its memory layout class
    (`lowering.layout`: "C", "F", "strided"), which lower-to-loop compiles
    its loads for. Arguments it does not name are C-contiguous."""

    name = "annotate-layouts"

    layouts: tuple[str, ...] = ()

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        f = next(o for o in op.ops if isinstance(o, func.FuncOp))
        n = len(f.body.blocks[0].args)
        lays = list(self.layouts) + ["C"] * (n - len(self.layouts))
        f.arg_attrs = ArrayAttr([DictionaryAttr({"lowering.layout": StringAttr(x)})
                                 for x in lays[:n]])


@dataclass(frozen=True)
class LowerToLoop(ModulePass):
    """Tensor-level `func.func`s become loop-level ones over memrefs. Each
    function's `LoweringReport` (kernels with the tensor ops fused into
    them, refused fusions) is appended to `reports`, for `explain`."""

    name = "lower-to-loop"

    # products sharing one ordered pass over their matrix's rows with the
    # products they need (`SharedRowsEmitter`), where the cost model prefers it
    shared_rows: bool = True
    # the threads such a pass splits its rows across, from a matrix of
    # `parallel_threshold` elements on (the CPU runtime's: `pipeline`)
    threads: int = 1
    parallel_threshold: int = 1 << 20
    # (points per program, programs wanted) of a column reduction split into
    # chunks of rows (`Lowering.column_split`); (0, 0): never
    column_split: tuple[int, int] = (0, 0)
    # kernels compute float16 and bfloat16 ops (in float32, rounded once to
    # the result type, as numpy's loops do: Triton), instead of numpy (LLVM on
    # the CPU: its half conversions call compiler-rt routines a JIT process
    # may lack)
    half_kernels: bool = False
    # the cost model may keep numpy's loop for a pointwise op of a shape class
    # (`power`) where the table predicts it faster (the CPU's; a GPU's kernels
    # compute them all)
    numpy_loops: bool = False
    # results written into the caller's arguments computed in their buffers
    # (`Lowering.in_place_result`: the CPU runtime's undo buffers)
    in_place_args: bool = False
    reports: list = field(default_factory=list, compare=False, repr=False)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        token = _HALF_KERNELS.set(self.half_kernels)
        loops = _NUMPY_LOOPS.set((self.threads, self.parallel_threshold)
                                 if self.numpy_loops else None)
        try:
            self._lower(op)
        finally:
            _NUMPY_LOOPS.reset(loops)
            _HALF_KERNELS.reset(token)

    def _lower(self, op: ModuleOp) -> None:
        for f in list(op.ops):
            if isinstance(f, func.FuncOp):
                new, report = lower_func(f, self.shared_rows, self.threads,
                                         self.parallel_threshold, self.column_split,
                                         self.in_place_args)
                self.reports.append(report)
                op.body.block.insert_op_before(new, f)
                op.body.block.erase_op(f)


@dataclass
class LoweringReport:
    kernels: list[tuple[str, list[str]]]  # (kernel, tensor ops fused into it)
    refused: list[str]  # why values got their own buffer
    # per op the cost model decided: which path (generated or library) and why
    paths: list[str] = field(default_factory=list)
    # the source locations (`location_text`) of the captured module's ops, in
    # order, that the lines above name: a program shared by modules of the
    # same IR (another function, another file) is reported at each one's own
    # (`relocated`)
    locations: list[str] = field(default_factory=list)

    def relocated(self, locations: list[str]) -> "LoweringReport":
        """The report with its locations read as those of a module of the
        same IR whose ops are at `locations` (same order); itself where the
        two do not correspond."""
        if len(locations) != len(self.locations) or locations == self.locations:
            return self
        moved: dict[str, str] = {}
        for old, new in zip(self.locations, locations):
            if old != new:
                moved.setdefault(old, new)
        if not moved:
            return self
        pattern = re.compile("|".join(re.escape(k) for k in sorted(moved, key=len, reverse=True)))

        def at(text: str) -> str:
            return pattern.sub(lambda m: moved[m.group(0)], text)
        return LoweringReport([(k, [at(o) for o in ops]) for k, ops in self.kernels],
                              [at(r) for r in self.refused], [at(p) for p in self.paths],
                              list(locations))


def location_text(op: Operation) -> str | None:
    """`(file:line)` of an op captured at a source line, else None."""
    from xdsl.dialects.builtin import FileLineColLoc

    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f"({loc.filename.data.rsplit('/', 1)[-1]}:{loc.line.data})"
    return None


def source_locations(module: Operation) -> list[str]:
    """The location texts of a module's ops, in walk order (ops without one
    left out)."""
    return [t for t in map(location_text, module.walk()) if t is not None]


def describe(op: Operation) -> str:
    """`op name "ufunc" (file:line)` for reports."""
    name = op.name + (f" \"{op.fn.data}\"" if isinstance(op, (A.UfuncOp, A.RoutineOp)) else "")
    where = location_text(op)
    return name if where is None else f"{name} {where}"


def layouts_of(f: func.FuncOp) -> list[str]:
    out = []
    attrs = f.arg_attrs.data if f.arg_attrs is not None else [DictionaryAttr({})] * len(f.body.blocks[0].args)
    for a in attrs:
        lay = a.data.get("lowering.layout")
        out.append(lay.data if isinstance(lay, StringAttr) else "C")
    return out


def lower_func(f: func.FuncOp, shared_rows: bool = True, threads: int = 1,
               parallel_threshold: int = 1 << 20, column_split: tuple[int, int] = (0, 0),
               in_place_args: bool = False) -> tuple[func.FuncOp, LoweringReport]:
    lw = Lowering(f, layouts_of(f), shared_rows=shared_rows, threads=threads,
                  parallel_threshold=parallel_threshold, column_split=column_split,
                  in_place_args=in_place_args)
    new = lw.run()
    flags_only(new, [lw.buffer[v] for op in lw.block.ops if isinstance(op, A.FlagsOp)
                     for v in op.operands if lw.uses[v] == 1 and v in lw.buffer
                     and v not in lw.flag_reads] + lw.flag_buffers)
    return new, LoweringReport(lw.kernel_ops, lw.reasons, lw.paths)


def flags_only(f: func.FuncOp, buffers: list[SSAValue]) -> None:
    """The values `array.flags` reads (`passes/keep_flags.py`) and nothing
    else, computed for their floating-point flags only: where kernels alone
    store into the buffer one got (no load, extern or return reads it),
    each store becomes a `loop.flags` of its value and the buffer goes. A
    value an extern writes (a numpy routine: its flags are numpy's own)
    keeps its buffer."""
    for b in buffers:
        alloc = b.owner
        if not isinstance(alloc, memref.AllocOp):
            continue
        users = [u.operation for u in b.uses]
        stores = [u for u in users if isinstance(u, L.StoreOp) and u.buffer is b]
        kernels = [u for u in users if isinstance(u, L.KernelOp)]
        if not stores or len(stores) + len(kernels) != len(users):
            continue
        for st in stores:
            Rewriter.replace_op(st, L.FlagsOp(st.value))
        for k in kernels:
            attrs = dict(k.attributes)
            nk = k.with_buffers([x for x in k.buffers if x is not b])
            nk.attributes.update(attrs)
            Rewriter.replace_op(k, nk)
        Rewriter.erase_op(alloc)
