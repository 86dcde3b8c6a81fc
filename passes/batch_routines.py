"""`batch-routines`: independent calls of one numpy routine, on operands of
one type and with one config, become one call on their stack — a loop's
`np.fft.rfft` of each segment (Welch's periodogram) is one rfft over the
(segments, n) array, as a `vmap` batching rule would make it. numpy's FFT
transforms several rows at once with SIMD (each row's result bit for bit the
one it computes alone), and one call instead of N saves N-1 calls' overhead.

Each routine's batching rule (`BATCHING`, keyed by routine name) says whether
a group of calls is worth batching and the config of the batched call; the
operands are stacked along a new leading axis (`array.concat` of each
operand, reshaped to one row: lower-to-loop computes each row in place in
the stack's buffer) — or, where they already are the rows of one array in
order (the slices of an earlier batched result), that array itself. Each
call's results are then the rows of the batched results (views). The
tensor level has no effects (random draws are inputs), so the function's
ops are reordered as the batched call needs: a stable topological order,
each op as early as it was where its operands allow."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import BFloat16Type, ComplexType, Float16Type, ModuleOp, TensorType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from dialects import array as A
from dialects.symbols import symbols_of

# an FFT of a few rows each is batched: numpy's FFT transforms up to 8 rows
# at once (its SIMD width in float32) — beyond that a call is already
# vectorized, and stacking would only copy
FFT_MAX_ROWS = 8
# an elementwise routine is batched where each call is small (its overhead,
# a few microseconds, then costs more than copying the operands to a stack)
# or its operands stack for free (rows of one array)
ELEMENTWISE_MAX_SIZE = 1 << 14
MAX_ROUNDS = 64  # batches made per function (each is one rewrite and reorder)


def _size(t: TensorType) -> int:
    n = 1
    for d in t.get_shape():
        n *= d
    return n


def _fft_1d(op: A.RoutineOp, free: bool) -> dict | None:
    """A 1-D transform along `axis`: batched along a new first axis (the
    transform's axis moves by one unless counted from the end)."""
    config = op.kwargs()
    axis = config.get("axis", -1)
    if len(op.inputs) != 1 or len(op.outputs) != 1 or not isinstance(axis, int):
        return None
    t = op.inputs[0].type
    shape = t.get_shape()
    if not shape or not -len(shape) <= axis < len(shape):
        return None
    if _size(t) // shape[axis] >= FFT_MAX_ROWS:
        return None
    return {**op.config.data, "axis": axis + 1 if axis >= 0 else axis}


def _elementwise(op: A.RoutineOp, free: bool) -> dict | None:
    """numpy's ufuncs (and `real`/`imag`) point by point: batched operands
    broadcast with an operand all calls share."""
    if len(op.outputs) != 1 or not (free or _size(op.outputs[0].type) <= ELEMENTWISE_MAX_SIZE):
        return None
    return dict(op.config.data)


BATCHING: dict[str, Callable[[A.RoutineOp, bool], dict | None]] = {
    "np.fft.fft": _fft_1d,
    "np.fft.ifft": _fft_1d,
    "np.fft.rfft": _fft_1d,
    "np.fft.irfft": _fft_1d,
    "np.fft.hfft": _fft_1d,
    "np.fft.ihfft": _fft_1d,
    "np.ufunc": _elementwise,
    "np.real": _elementwise,
    "np.imag": _elementwise,
}
# routines whose operands all calls share are passed as they are (they
# broadcast against the batched ones)
SHARES_OPERANDS = frozenset({"np.ufunc"})


def _rows_read_in_place(op: A.RoutineOp) -> bool:
    """A result of a type kernels do not copy (complex, float16) is batched
    only where numpy routines alone read it: they read its row where it lies
    (a returned row, or one a kernel reads, would need a copy)."""
    return all(not isinstance(r.type.element_type, (ComplexType, Float16Type, BFloat16Type))
               or all(isinstance(u.operation, A.RoutineOp) for u in r.uses)
               for r in op.results)


def _key(op: A.RoutineOp) -> tuple:
    return (op.fn.data, str(op.config), tuple(str(v.type) for v in op.operands),
            tuple(str(r.type) for r in op.results))


def rows_of(values: list[SSAValue]) -> SSAValue | None:
    """X where values[i] is row i of X (`reshape(slice(X, [i, 0, ...]))`) and
    X has exactly len(values) rows."""
    src = None
    for i, v in enumerate(values):
        r = v.owner
        s = r.input.owner if isinstance(r, A.ReshapeOp) else None
        if not isinstance(s, A.SliceOp):
            return None
        x = s.input
        shape = x.type.get_shape()
        if (src not in (None, x) or shape[0] != len(values)
                or A.ints(s.start) != (i,) + (0,) * (len(shape) - 1)
                or any(st != 1 for st in A.ints(s.step))
                or tuple(s.result.type.get_shape()) != (1, *shape[1:])
                or tuple(v.type.get_shape()) != tuple(shape[1:])):
            return None
        src = x
    return src


def _operand_plan(ops: list[A.RoutineOp]) -> list[tuple[str, object]] | None:
    """Per operand position: ("shared", v), ("rows", X) or ("stack", values);
    None where an operand the routine cannot share differs in shape from its
    result (it would broadcast wrongly once stacked)."""
    plan = []
    fn = ops[0].fn.data
    for p in range(len(ops[0].inputs)):
        vals = [op.inputs[p] for op in ops]
        if fn in SHARES_OPERANDS and all(v is vals[0] for v in vals):
            plan.append(("shared", vals[0]))
            continue
        if fn in SHARES_OPERANDS and any(
                tuple(op.inputs[p].type.get_shape()) != tuple(op.outputs[0].type.get_shape())
                for op in ops):
            return None
        x = rows_of(vals)
        plan.append(("rows", x) if x is not None else ("stack", vals))
    return plan


def _ancestors(block: Block, candidates: dict[Operation, int]) -> dict[Operation, int]:
    """Per op, the bit set of candidate ops it depends on (itself included)."""
    bits: dict[Operation, int] = {}
    for op in block.ops:
        b = 1 << candidates[op] if op in candidates else 0
        for v in op.operands:
            owner = v.owner
            if isinstance(owner, Operation) and owner in bits:
                b |= bits[owner]
        bits[op] = b
    return bits


def find_batch(block: Block) -> tuple[list[A.RoutineOp], dict, list] | None:
    """The first group of two or more mutually independent calls worth
    batching: (calls, batched config, operand plan)."""
    groups: dict[tuple, list[A.RoutineOp]] = {}
    for op in block.ops:
        types = [v.type for v in (*op.operands, *op.results)]
        if (isinstance(op, A.RoutineOp) and op.fn.data in BATCHING and not symbols_of(types)
                and all(_size(t) for t in types) and _rows_read_in_place(op)):
            groups.setdefault(_key(op), []).append(op)
    groups = {k: g for k, g in groups.items() if len(g) >= 2}
    if not groups:
        return None
    candidates = {op: i for i, op in enumerate(op for g in groups.values() for op in g)}
    bits = _ancestors(block, candidates)
    for group in groups.values():
        remaining = group
        while len(remaining) >= 2:
            batch, mask, rest = [], 0, []
            for op in remaining:  # in program order: an op never depends on a later one
                if bits[op] & ~(1 << candidates[op]) & mask:
                    rest.append(op)
                else:
                    batch.append(op)
                    mask |= 1 << candidates[op]
            if len(batch) >= 2:
                plan = _operand_plan(batch)
                if plan is not None:
                    free = all(kind != "stack" for kind, _ in plan)
                    config = BATCHING[batch[0].fn.data](batch[0], free)
                    if config is not None:
                        return batch, config, plan
            remaining = rest
    return None


def _stacked(kind: str, x, n: int, new: list[Operation]) -> SSAValue:
    if kind != "stack":
        return x
    t = x[0].type
    shape = tuple(t.get_shape())
    row = TensorType(t.element_type, (1, *shape))
    pieces = []
    for v in x:
        r = A.ReshapeOp(v, row)
        new.append(r)
        pieces.append(r.result)
    cat = A.ConcatOp(pieces, 0, TensorType(t.element_type, (n, *shape)))
    new.append(cat)
    return cat.result


def batch(block: Block, ops: list[A.RoutineOp], config: dict, plan: list) -> None:
    """Replace `ops` by one call on their operands' stacks, placed where the
    last of them was; each call's results become rows of its results."""
    n = len(ops)
    new: list[Operation] = []
    operands = [_stacked(kind, x, n, new) for kind, x in plan]
    types = [TensorType(r.type.element_type, (n, *r.type.get_shape())) for r in ops[0].results]
    call = A.RoutineOp(ops[0].fn.data, operands, config, types)
    new.append(call)
    for i, op in enumerate(ops):
        for r, big in zip(op.results, call.results):
            shape = tuple(r.type.get_shape())
            row = A.SliceOp(big, (i,) + (0,) * len(shape), (1,) * (len(shape) + 1),
                            TensorType(r.type.element_type, (1, *shape)))
            flat = A.ReshapeOp(row.result, r.type)
            new += [row, flat]
            r.replace_all_uses_with(flat.result)
    block.insert_ops_before(new, ops[-1])
    for op in ops:
        block.erase_op(op)


def stable_topological_order(block: Block) -> None:
    """Reorder block's ops so that each comes after its operands' ops, each
    as early as its place in the block allows (Kahn's algorithm, the earliest
    ready op first); the terminator stays last."""
    ops = list(block.ops)
    index = {op: i for i, op in enumerate(ops)}
    waiting = {op: 0 for op in ops}
    users: dict[Operation, list[Operation]] = {op: [] for op in ops}
    for op in ops:
        for owner in {v.owner for v in op.operands}:
            if isinstance(owner, Operation) and owner in index:
                waiting[op] += 1
                users[owner].append(op)
    ready = [(index[op], op) for op in ops if waiting[op] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, op = heapq.heappop(ready)
        order.append(op)
        for u in users[op]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (index[u], u))
    assert len(order) == len(ops), "batch-routines: the function's ops form a cycle"
    if order == ops:
        return
    for op in ops:
        block.detach_op(op)
    block.add_ops(order)


@dataclass(frozen=True)
class BatchRoutines(ModulePass):
    name = "batch-routines"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in op.ops:
            if not isinstance(f, func.FuncOp) or not f.body.blocks:
                continue
            block = f.body.blocks[0]
            for _ in range(MAX_ROUNDS):
                found = find_batch(block)
                if found is None:
                    break
                batch(block, *found)
                stable_topological_order(block)
