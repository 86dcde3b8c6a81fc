"""`keep-flags`: numpy computes every op a program writes, used or not, and
warns or raises on its floating-point exceptions as `np.errstate` says;
`z = x / y` left unused still says "divide by zero". Dead-code elimination
(xDSL's DCE, CSE, the pattern rewriter, the forward/backward cut, the loop
level's dead stores) would drop such an op and its flags with it. This pass
runs first, on the captured function: each op nothing reaches the results
or an effect from (a dead op) that can raise a category of `categories` —
`dialects.array.fp_flags`, from the op table's `fpe` column — is read by
one `array.flags` op, which has an effect, so every later pass keeps it
and what it reads. Only the last such op of a dead chain is read (it
computes those before it). Below the tensor level they are computed in
kernels that store nothing (`loop.flags`).

`categories` are those the caller's errstate does not ignore when the
program is compiled (`lowering.pipeline.compile_segment`); an op of none of
them is dropped as before. A program compiled so serves a later call only
while its errstate ignores the categories of the ops dropped
(`dropped_categories`; the entry's guard `FlagsCheck`): under
`np.errstate(all="ignore")` unused ops cost nothing. Ops of the backward of
a joint function (`bwd`) are the compiler's, not the user's, and are
never kept."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.transforms.dead_code_elimination import would_be_trivially_dead

from dialects import array as A
from dialects.ufuncs import FPE_CATEGORIES

from .autograd import BWD


def dead_ops(block: Block) -> list[Operation]:
    """The ops of `block` (in order) whose results reach neither its
    terminator nor an op with an effect."""
    live: set[Operation] = set()
    stack = [op for op in block.ops if not would_be_trivially_dead(op)]
    while stack:
        op = stack.pop()
        if op in live:
            continue
        live.add(op)
        for o in op.operands:
            if isinstance(o.owner, Operation) and o.owner.parent_block() is block:
                stack.append(o.owner)
    return [op for op in block.ops if op not in live]


def flag_ops(block: Block, categories) -> list[Operation]:
    """The dead ops to keep for their flags: those that can raise one of
    `categories`, but for one another dead op to keep reads (through dead
    ops): it computes them."""
    wanted = frozenset(categories)
    dead = dead_ops(block)
    dead_set = set(dead)
    keep: list[Operation] = []
    covered: set[Operation] = set()
    for op in reversed(dead):
        if op in covered or BWD in op.attributes:
            continue
        if not (A.fp_flags(op) & wanted):
            continue
        keep.append(op)
        stack = [op]
        while stack:  # what it reads is computed with it
            for o in stack.pop().operands:
                p = o.owner
                if isinstance(p, Operation) and p in dead_set and p not in covered:
                    covered.add(p)
                    stack.append(p)
    return keep[::-1]


def dropped_categories(module: ModuleOp, categories) -> frozenset[str]:
    """The categories of the dead ops a program compiled for `categories`
    drops (those of no category it keeps): a call whose errstate acts on
    one of them needs another program."""
    kept = frozenset(categories)
    out: set[str] = set()
    for f in module.ops:
        if isinstance(f, func.FuncOp) and f.body.blocks:
            for op in dead_ops(f.body.blocks[0]):
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
        if not self.categories:
            return
        for f in [o for o in op.ops if isinstance(o, func.FuncOp)]:
            if not f.body.blocks:
                continue
            block = f.body.blocks[0]
            keep = flag_ops(block, self.categories)
            if keep:
                block.insert_op_before(A.FlagsOp([op.results[0] for op in keep]),
                                       block.last_op)
