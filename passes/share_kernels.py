"""share-kernels: kernels that differ only in constants share one body.

An unrolled Python loop (`for i in range(n): out[i] = f(x[i]) + i`) gives one
kernel per iteration whose bodies differ only in constants: the row a load
or a store starts at (the constant term of its index map) and the loop
counter in the arithmetic (a `loop.const`). This pass finds, in each
function, the kernels of one structure (everything equal but those
constants), and where such a group's members disagree on a constant it
makes that constant a kernel parameter in every member: an index constant
becomes an affine symbol operand fed by `kernel.param k : index`, a
`loop.const` becomes `kernel.param k` of its type, and each member's
`params` gives its own values. The members' bodies are then identical and
the code generator compiles one function for them all (keyed by the body's
text, process-wide), launched once per member with its values. Constants
all members agree on stay constants, so a group's code is as specialized
as its members allow; a kernel with no twin is left as it is.

The holes are exactly two kinds of site, so a body with anything else that
differs is not grouped: the constant term of each coordinate of a
`loop.load` / `loop.store` index map, and each use of a `loop.const`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, IndexType, ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineExpr, AffineMap
from xdsl.passes import ModulePass

from dialects import kernel as K
from dialects import loop as L

# the schedule's bookkeeping, not part of what a kernel computes
_NOT_STRUCTURE = ("sym_name", "params", "merged")


@dataclass(frozen=True)
class Hole:
    """One constant site of a kernel: coordinate `at` of `op`'s index map
    (kind "map", value an int), or operand `at` of `op` when it is a
    `loop.const` (kind "use", value the constant's text)."""

    kind: str
    op: Operation
    at: int
    value: object


def split_constant(e: AffineExpr) -> tuple[AffineExpr | None, int]:
    """e as (the rest, its constant term): `d0 + 3` -> (d0, 3), `5` -> (None, 5)."""
    if isinstance(e, AffineConstantExpr):
        return None, e.value
    if isinstance(e, AffineBinaryOpExpr) and e.kind == AffineBinaryOpKind.Add:
        a, ca = split_constant(e.lhs)
        b, cb = split_constant(e.rhs)
        rest = a if b is None else b if a is None else a + b
        return rest, ca + cb
    return e, 0


def _map_key(op: L.LoadOp | L.StoreOp, holes: list[Hole]) -> tuple:
    m = op.map.data
    parts = []
    for r, e in enumerate(m.results):
        rest, c = split_constant(e)
        holes.append(Hole("map", op, r, c))
        parts.append(str(rest))
    return (m.num_dims, m.num_symbols, tuple(parts))


def _props_key(op: Operation, holes: list[Hole]) -> tuple:
    if isinstance(op, (L.LoadOp, L.StoreOp)) and op.map.data.num_symbols == 0:
        return _map_key(op, holes)
    return tuple(sorted(op.properties.items()))


def fingerprint(k: K.KernelOp) -> tuple[tuple, list[Hole]]:
    """The kernel's structure with its holes left out (equal for kernels that
    differ only in them), and its holes in walk order. A `loop.const` is a
    value at each of its uses (as in LLVM), so kernels whose equal constants
    were merged differently still compare equal."""
    ids: dict[SSAValue, object] = {}
    for i, b in enumerate(k.buffers):
        ids.setdefault(b, ("buffer", i))
    holes: list[Hole] = []
    parts: list = [tuple(b.type for b in k.buffers),
                   tuple((n, v) for n, v in sorted(k.properties.items()) if n not in _NOT_STRUCTURE),
                   tuple((n, v) for n, v in sorted(k.attributes.items()) if n not in _NOT_STRUCTURE)]
    for a in k.body.block.args:
        ids[a] = len(ids)
    for op in k.body.walk():
        if isinstance(op, L.ConstOp):
            continue
        operands = []
        for j, o in enumerate(op.operands):
            if isinstance(o.owner, L.ConstOp):
                holes.append(Hole("use", op, j, o.owner.value.data))
                operands.append(("const", o.type))
            elif o in ids:
                operands.append(ids[o])
            else:  # a value from outside the kernel that is not a buffer
                return (id(k),), []
        parts.append((op.name, tuple(operands), tuple(r.type for r in op.results),
                      _props_key(op, holes), tuple(sorted(op.attributes.items()))))
        for r in op.results:
            ids[r] = len(ids)
        for region in op.regions:
            for block in region.blocks:
                for a in block.args:
                    ids[a] = len(ids)
    return tuple(parts), holes


def _kernels(f: func.FuncOp) -> Iterator[K.KernelOp]:
    return (op for op in f.body.block.ops if isinstance(op, K.KernelOp))


def holes_kind(h: Hole) -> tuple:
    """What a parameter for hole h is: an index, or a value of the const's type."""
    return ("index",) if h.kind == "map" else ("value", h.op.operands[h.at].type)


def parameterize(k: K.KernelOp, holes: list[Hole], varying: list[int], param_of: list[int]) -> None:
    """Make holes `varying` (positions in `holes`) the kernel's parameters:
    hole varying[i] reads parameter param_of[i]."""
    block = k.body.block
    first = block.first_op
    params: dict[int, SSAValue] = {}
    values: dict[int, str] = {}
    symbols: dict[Operation, dict[int, SSAValue]] = {}
    consts: set[Operation] = set()
    for j, n in zip(varying, param_of):
        h = holes[j]
        if n not in params:
            p = K.ParamOp(n, IndexType() if h.kind == "map" else h.op.operands[h.at].type)
            block.insert_op_before(p, first)
            params[n], values[n] = p.result, str(h.value)
        if h.kind == "use":
            consts.add(h.op.operands[h.at].owner)
            h.op.operands = [params[n] if i == h.at else o for i, o in enumerate(h.op.operands)]
        else:
            symbols.setdefault(h.op, {})[h.at] = params[n]
    for op, by_result in symbols.items():
        _symbolize(op, by_result)
    for c in consts:  # a constant all of whose uses read parameters now
        if not c.results[0].uses:
            c.detach()
            c.erase()
    k.params = ArrayAttr([StringAttr(values[n]) for n in range(len(values))])


def _symbolize(op: L.LoadOp | L.StoreOp, by_result: dict[int, SSAValue]) -> None:
    """Coordinate r of op's map reads symbol operand by_result[r] in place of
    its constant term."""
    m = op.map.data
    results, operands = [], []
    for r, e in enumerate(m.results):
        if r in by_result:
            rest, _ = split_constant(e)
            s = AffineExpr.symbol(len(operands))
            results.append(s if rest is None else rest + s)
            operands.append(by_result[r])
        else:
            results.append(e)
    op.map = type(op.map)(AffineMap(m.num_dims, len(operands), tuple(results)))
    op.operands = [*op.operands, *operands]


def share(f: func.FuncOp) -> int:
    """Parameterize the kernel groups of `f`; the number of kernels made to
    share a body with another."""
    groups: dict[tuple, list[tuple[K.KernelOp, list[Hole]]]] = {}
    for k in _kernels(f):
        if k.params is not None:
            continue
        key, holes = fingerprint(k)
        groups.setdefault(key, []).append((k, holes))
    shared = 0
    for members in groups.values():
        if len(members) < 2:
            continue
        n = len(members[0][1])
        columns = [tuple(m[1][j].value for m in members) for j in range(n)]
        varying = [j for j in range(n) if len(set(columns[j])) > 1]
        if not varying:
            continue
        # holes whose values agree in every member (a row read and written
        # at the same offset) read one parameter
        number: dict[tuple, int] = {}
        param_of = [number.setdefault((holes_kind(members[0][1][j]), columns[j]), len(number))
                    for j in varying]
        for k, holes in members:
            parameterize(k, holes, varying, param_of)
        shared += len(members)
    return shared


@dataclass(frozen=True)
class ShareKernels(ModulePass):
    """`xdsl-opt -p share-kernels`: kernels of one structure that differ in
    constants read them as parameters (see the module's docstring)."""

    name = "share-kernels"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in [o for o in op.ops if isinstance(o, func.FuncOp)]:
            share(f)
