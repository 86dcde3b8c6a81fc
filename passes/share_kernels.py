"""share-kernels: kernels that differ only in constants and sizes share one body.

An unrolled Python loop (`for i in range(n): out[i] = f(x[i]) + i`) gives one
kernel per iteration whose bodies differ only in constants: the row a load
or a store starts at (the constant term of its index map) and the loop
counter in the arithmetic (a `loop.const`); a loop over shrinking slices
(`c[i + 1:, i] = ...`) also in sizes. This pass finds, in each function, the
kernels of one structure (everything equal but those holes), and where such
a group's members disagree on a hole it makes that hole vary per launch in
every member:
  - an index constant becomes an affine symbol operand fed by
    `kernel.param k : index`, a `loop.const` use reads `kernel.param k` of
    its type, a `loop.map` or `loop.reduce` extent is DYN with a
    `kernel.param` size operand (each member's `params` gives its own
    values: `for i in range(n): out[i] = x[i, :i + 1].sum()` is one body);
  - the outermost parallel extent is DYN (the launch's `work` covers it);
  - a buffer whose shape differs is read through a `memref.cast` to a type
    with those dims dynamic (the array's own shape and strides at the launch).
The members' bodies are then identical and the code generator compiles one
function for them all (process-wide), launched once per member. Holes all
members agree on stay constants, so a group's code is as specialized as its
members allow; a kernel with no twin is left as it is; and kernels over more
than SHARE_SIZES_MAX_ELEMENTS elements keep their sizes (only members of
equal sizes share), as code for known sizes is faster and a big kernel is
worth its compile.

A `loop.const` counts as a value at each of its uses (as in LLVM), so equal
constants merged differently by CSE do not keep kernels apart."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import ArrayAttr, IndexType, MemRefType, ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineExpr, AffineMap
from xdsl.passes import ModulePass

from dialects import kernel as K
from dialects import loop as L
from dialects.array import DYN, i64_array
from dialects.symbols import SymDim, SymStr, is_symbolic

# the schedule's bookkeeping and the launch's own numbers (each kernel keeps
# its own `work` and `threads`), not part of a kernel's body
_NOT_STRUCTURE = ("sym_name", "params", "merged", "work", "threads", "parallel")


@dataclass(frozen=True)
class Hole:
    """One constant site of a kernel: coordinate `at` of `op`'s index map
    (kind "map", value an int); operand `at` of `op` when it is a
    `loop.const` (kind "use", value the constant's text); extent `at` of a
    `loop.map` or a `loop.reduce` (kind "range"); the outermost parallel
    extent of the kernel `op` (kind "parallel"); dim at[1] of the kernel's
    buffer at[0] (kind "shape"). The first three become parameters; the
    kernel's launch gives the outermost parallel extent (its `work`), and a
    buffer's array its shape and strides."""

    kind: str
    op: Operation
    at: object
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


def _inner_sizes(e: AffineExpr | None, found: list, make=None) -> AffineExpr | None:
    """e with each constant that is a size symbol's value (`dialects.symbols`:
    a row length a flattened index divides by) replaced, in walk order (each
    appended to `found`), by `make(j)` (default: a placeholder symbol 1000 + j,
    for the structure key)."""
    if e is None:
        return None
    if isinstance(e, AffineConstantExpr):
        if isinstance(e.value, SymDim):
            found.append(e.value)
            j = len(found) - 1
            return make(j) if make is not None else AffineExpr.symbol(1000 + j)
        return e
    if isinstance(e, AffineBinaryOpExpr):
        return AffineBinaryOpExpr(e.kind, _inner_sizes(e.lhs, found, make),
                                  _inner_sizes(e.rhs, found, make))
    return e


def _map_key(op: L.LoadOp | L.StoreOp, holes: list[Hole]) -> tuple:
    m = op.map.data
    parts = []
    for r, e in enumerate(m.results):
        rest, c = split_constant(e)
        holes.append(Hole("map", op, r, c))
        inner: list = []
        rest = _inner_sizes(rest, inner)
        for j, v in enumerate(inner):  # (sizes inside the index: parameters too)
            holes.append(Hole("mapsize", op, (r, j), v))
        parts.append(str(rest))
    return (m.num_dims, m.num_symbols, tuple(parts))


def _props_key(op: Operation, holes: list[Hole]) -> tuple:
    if isinstance(op, (L.LoadOp, L.StoreOp)) and op.map.data.num_symbols == 0:
        return _map_key(op, holes)
    if isinstance(op, (L.MapOp, L.ReduceOp)) and not op.sizes:
        for d, n in enumerate(L.ints(op.ranges)):
            holes.append(Hole("range", op, d, n))
        # (the extents are holes; a reduction's kind is structure)
        rest = tuple(sorted((n, v) for n, v in op.properties.items() if n != "ranges"))
        return ("ranges", len(op.ranges), rest)
    return tuple(sorted(op.properties.items()))


def _kernel_key(k: K.KernelOp, holes: list[Hole]) -> list:
    """The kernel op's own part of its structure: its buffers' element types,
    ranks and layouts (their sizes are holes), its parallel dims but the
    outermost (a hole where the launch splits them) and its schedule."""
    par = list(L.ints(k.parallel))
    if par and k.split.data == "parallel" and par[0] != DYN:
        holes.append(Hole("parallel", k, 0, par[0]))
        par[0] = DYN
    bufs = []
    for j, b in enumerate(k.buffers):
        t = b.type
        for d, n in enumerate(t.get_shape()):
            holes.append(Hole("shape", k, (j, d), n))
        bufs.append((t.element_type, len(t.get_shape()), t.layout, t.memory_space))
    return [tuple(bufs), tuple(par),
            tuple((n, v) for n, v in sorted(k.properties.items()) if n not in _NOT_STRUCTURE),
            tuple((n, v) for n, v in sorted(k.attributes.items()) if n not in _NOT_STRUCTURE)]


def fingerprint(k: K.KernelOp) -> tuple[tuple, list[Hole]]:
    """The kernel's structure with its holes left out (equal for kernels that
    differ only in them), and its holes in walk order. A `loop.const` is a
    value at each of its uses (as in LLVM), so kernels whose equal constants
    were merged differently still compare equal."""
    ids: dict[SSAValue, object] = {}
    for i, b in enumerate(k.buffers):
        ids.setdefault(b, ("buffer", i))
    holes: list[Hole] = []
    parts: list = _kernel_key(k, holes)
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


def holes_kind(h: Hole) -> tuple | None:
    """What a parameter for hole h is: an index, a value of the const's type,
    or None where the launch gives the value (no parameter)."""
    if h.kind in ("map", "mapsize", "range"):
        return ("index",)
    if h.kind == "use":
        return ("value", h.op.operands[h.at].type)
    return None


def parameterize(k: K.KernelOp, holes: list[Hole], varying: list[int],
                 param_of: list[int | None]) -> None:
    """Make holes `varying` (positions in `holes`) vary per launch: hole
    varying[i] reads parameter param_of[i] (None: the launch gives it)."""
    block = k.body.block
    first = block.first_op
    params: dict[int, SSAValue] = {}
    values: dict[int, str] = {}
    symbols: dict[Operation, dict[int, SSAValue]] = {}
    extents: dict[Operation, dict[int, SSAValue]] = {}
    shapes: dict[int, set[int]] = {}
    consts: set[Operation] = set()
    for j, n in zip(varying, param_of):
        h = holes[j]
        if n is not None and n not in params:
            p = K.ParamOp(n, h.op.operands[h.at].type if h.kind == "use" else IndexType())
            block.insert_op_before(p, first)
            params[n], values[n] = p.result, param_text(h.value)
        if h.kind == "use":
            consts.add(h.op.operands[h.at].owner)
            h.op.operands = [params[n] if i == h.at else o for i, o in enumerate(h.op.operands)]
        elif h.kind == "map":
            symbols.setdefault(h.op, {})[h.at] = params[n]
        elif h.kind == "mapsize":
            symbols.setdefault(h.op, {})[h.at] = params[n]
        elif h.kind == "range":
            extents.setdefault(h.op, {})[h.at] = params[n]
        elif h.kind == "parallel":
            k.parallel = i64_array([DYN, *L.ints(k.parallel)[1:]])
        else:
            shapes.setdefault(h.at[0], set()).add(h.at[1])
    for op, by_result in symbols.items():
        _symbolize(op, by_result)
    for op, by_dim in extents.items():
        _dynamic_extents(op, by_dim)
    for j, dims in shapes.items():
        _dynamic_shape(k, j, dims)
    for c in consts:  # a constant all of whose uses read parameters now
        if not c.results[0].uses:
            c.detach()
            c.erase()
    if values:
        k.params = ArrayAttr([StringAttr(values[n]) for n in range(len(values))])


def param_text(value) -> str:
    """A parameter's value as `loop.const` writes it; a symbolic size's or
    constant's (`dialects.symbols`) keeps its expression."""
    if isinstance(value, SymStr):
        return value
    if isinstance(value, SymDim):
        return SymStr(str(value), value.expr)
    return str(value)


def _dynamic_extents(op: L.MapOp | L.ReduceOp, by_dim: dict[int, SSAValue]) -> None:
    """The op's extents `by_dim` are DYN, read from their `sizes` operands
    (the op has no other operands)."""
    ranges = list(L.ints(op.ranges))
    op.ranges = i64_array([DYN if d in by_dim else n for d, n in enumerate(ranges)])
    op.operands = [by_dim[d] for d in sorted(by_dim)]


def _dynamic_shape(k: K.KernelOp, j: int, dims: set[int]) -> None:
    """The kernel reads buffer j through a `memref.cast` to a type whose dims
    `dims` are dynamic (the array's own shape and strides at the launch)."""
    buf = k.buffers[j]
    t = buf.type
    shape = [DYN if d in dims else n for d, n in enumerate(t.get_shape())]
    cast = memref.CastOp.get(buf, MemRefType(t.element_type, shape, t.layout, t.memory_space))
    k.parent_block().insert_op_before(cast, k)
    for use in list(buf.uses):
        if use.operation is k or k.is_ancestor(use.operation):
            use.operation.operands = [cast.dest if i == use.index else o
                                      for i, o in enumerate(use.operation.operands)]


def _symbolize(op: L.LoadOp | L.StoreOp, by_result: dict) -> None:
    """Coordinate r of op's map reads symbol operand by_result[r] in place of
    its constant term, and by_result[(r, j)] in place of its j-th size inside
    (see `_inner_sizes`)."""
    m = op.map.data
    results, operands = [], []
    for r, e in enumerate(m.results):
        inner = {j: v for (at, v) in by_result.items() if isinstance(at, tuple) and at[0] == r
                 for j in [at[1]]}
        if r in by_result or inner:
            rest, c = split_constant(e)
            if inner:
                def make(j: int) -> AffineExpr:
                    operands.append(inner[j])
                    return AffineExpr.symbol(len(operands) - 1)
                rest = _inner_sizes(rest, [], make)
            if r in by_result:
                s = AffineExpr.symbol(len(operands))
                results.append(s if rest is None else rest + s)
                operands.append(by_result[r])
            else:
                results.append(rest if c == 0 else (AffineExpr.constant(c) if rest is None
                                                     else rest + c))
        else:
            results.append(e)
    op.map = type(op.map)(AffineMap(m.num_dims, len(operands), tuple(results)))
    op.operands = [*op.operands, *operands]


# kernels over more elements than this keep their sizes compiled in (a
# loop's iterations of one body share it when they differ in offsets and
# constants only): the code for a known size is faster, and a kernel this
# big is worth its compile
SHARE_SIZES_MAX_ELEMENTS = 1 << 16
SIZE_HOLES = ("range", "parallel", "shape")


def _elements(k: K.KernelOp) -> int:
    return max([int(np.prod(b.type.get_shape(), dtype=np.int64)) for b in k.buffers] + [0])


def _split_large(members: list) -> list[list]:
    """The group, or — where a member is large — its subgroups of equal sizes
    (a group whose sizes are symbolic stays whole: its sizes vary anyway)."""
    if any(is_symbolic(h.value) for _, holes in members for h in holes if h.kind in SIZE_HOLES):
        return [members]
    if len(members) < 2 or all(_elements(k) <= SHARE_SIZES_MAX_ELEMENTS for k, _ in members):
        return [members]
    by_sizes: dict[tuple, list] = {}
    for k, holes in members:
        by_sizes.setdefault(tuple(h.value for h in holes if h.kind in SIZE_HOLES), []).append((k, holes))
    return list(by_sizes.values())


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
    for members in [g for key, group in groups.items() for g in _split_large(group)]:
        n = len(members[0][1])
        # a hole holding a size symbol's value varies too, in a kernel of its own
        symbolic = {j for j in range(n) if any(is_symbolic(m[1][j].value) for m in members)}
        if len(members) < 2 and not symbolic:
            continue
        columns = [tuple(m[1][j].value for m in members) for j in range(n)]
        varying = [j for j in range(n) if len(set(columns[j])) > 1 or j in symbolic]
        if not varying:
            continue
        # holes whose values agree in every member (a row read and written
        # at the same offset) read one parameter
        number: dict[tuple, int] = {}
        param_of = []
        for j in varying:
            kind = holes_kind(members[0][1][j])
            param_of.append(None if kind is None else number.setdefault((kind, columns[j]), len(number)))
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
