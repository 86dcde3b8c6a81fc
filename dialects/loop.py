"""The loop level: `loop`, fused groups over buffers.

A `loop.kernel` is one fused group. Its region's block arguments are the
indices of the parallel dims (`parallel` sizes); inside, `loop.reduce` ops
compute scalars over reduction dims (their own region, yielding the value to
combine), `loop.map` ops run a pointwise body over inner dims and `loop.store`
results. Buffers are memrefs read with `loop.load` and written with
`loop.store` through affine index maps — broadcasts, transposes, strided slices
and reshapes of contiguous data are index maps here, never copies. Scalar
arithmetic in the bodies is upstream `arith`/`math`, plus `loop.ufunc` and
`loop.cast` for numpy meanings upstream lacks (as at the tensor level).

Around kernels, the function allocates buffers (`memref.alloc`) and calls
externs (`loop.extern`: BLAS matmul and numpy routines not yet generated)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    AffineMapAttr,
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    MemRefType,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.irdl import (
    IRDLOperation,
    base,
    irdl_op_definition,
    operand_def,
    opt_region_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import IsTerminator, Pure, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException

from .array import DYN, REDUCE_KINDS, FlagsEffect, i64_array, ints
from .ufuncs import verify_call

LOOP_REDUCE_KINDS = REDUCE_KINDS + ("argmax", "argmin")

# a `memref.alloc`'s attribute: the index of the argument whose old values a
# kernel stores into the buffer before writing over them in the argument's
# own buffer; the runtime copies them back before an eager re-run
UNDO_ATTR = "lowering.undo"
# ... with this unit attribute, the buffer holds them transposed (a kernel
# that walks an F-ordered argument in its memory order)
UNDO_TRANSPOSED_ATTR = "lowering.undo_transposed"
AnyMemRef = base(MemRefType)


def _index_block(n: int) -> Block:
    return Block(arg_types=[IndexType()] * n)


@irdl_op_definition
class YieldOp(IRDLOperation):
    name = "loop.yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator(), Pure())
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue):
        super().__init__(operands=[list(values)])


@irdl_op_definition
class KernelOp(IRDLOperation):
    """One fused group: for each point of the parallel domain, run the body."""

    name = "loop.kernel"
    buffers = var_operand_def(AnyMemRef)
    sym_name = prop_def(StringAttr)
    parallel = prop_def(DenseArrayBase.constr(i64))
    body = region_def("single_block")
    traits = traits_def(RecursiveMemoryEffect())
    assembly_format = "$sym_name `(` $buffers `)` `parallel` $parallel $body attr-dict `:` type($buffers)"

    def __init__(self, name: str, buffers: Sequence[SSAValue], parallel: Sequence[int]):
        super().__init__(
            operands=[list(buffers)],
            properties={"sym_name": StringAttr(name), "parallel": i64_array(parallel)},
            regions=[Region(_index_block(len(parallel)))],
        )

    def verify_(self) -> None:
        n = len(ints(self.parallel))
        if len(self.body.block.args) != n:
            raise VerifyException(f"loop.kernel: body needs {n} index arguments")

    def with_buffers(self, buffers: Sequence[SSAValue]) -> "KernelOp":
        """A new kernel with this one's name, parallel dims and body (moved,
        not copied), over `buffers`: a body is built before its kernel knows
        which buffers it touches."""
        k = KernelOp(self.sym_name.data, buffers, ints(self.parallel))
        k.body.detach_block(0)
        k.body.add_block(self.body.detach_block(0))
        return k


def _verify_sizes(op: IRDLOperation, ranges: DenseArrayBase, sizes: Sequence[SSAValue]) -> None:
    """One `sizes` operand per DYN extent (`loop.map`, `loop.reduce`)."""
    dynamic = sum(1 for n in ints(ranges) if n == DYN)
    if dynamic != len(sizes):
        raise VerifyException(f"{op.name}: {dynamic} dynamic extents, {len(sizes)} sizes")


def _extents(ranges: DenseArrayBase, sizes: Sequence[SSAValue]) -> list[int | SSAValue]:
    """Each dim's extent: the static int, or (DYN) the next of `sizes`."""
    it = iter(sizes)
    return [next(it) if n == DYN else n for n in ints(ranges)]


@irdl_op_definition
class ReduceOp(IRDLOperation):
    """Combine the yielded value over the reduction domain `ranges`. argmax /
    argmin give the first position (row-major within `ranges`) of the extreme,
    NaN winning, as i64. An extent known only when the kernel runs (kernels
    of one body reducing rows of different lengths) is DYN in `ranges`, its
    value the next of the `sizes` operands, as in `loop.map`."""

    name = "loop.reduce"
    kind = prop_def(StringAttr)
    ranges = prop_def(DenseArrayBase.constr(i64))
    sizes = var_operand_def(IndexType)
    result = result_def()
    body = region_def("single_block")
    traits = traits_def(RecursiveMemoryEffect())
    assembly_format = "$kind $ranges (`sizes` `(` $sizes^ `)`)? $body attr-dict `:` type($result)"

    def __init__(self, kind: str, ranges: Sequence[int], result_type: Attribute,
                 sizes: Sequence[SSAValue] = ()):
        super().__init__(
            operands=[list(sizes)],
            properties={"kind": StringAttr(kind), "ranges": i64_array(ranges)},
            result_types=[result_type],
            regions=[Region(_index_block(len(ranges)))],
        )

    def verify_(self) -> None:
        if self.kind.data not in LOOP_REDUCE_KINDS:
            raise VerifyException(f"loop.reduce: kind must be one of {LOOP_REDUCE_KINDS}")
        _verify_sizes(self, self.ranges, self.sizes)
        term = self.body.block.last_op
        if not isinstance(term, YieldOp) or len(term.values) != 1:
            raise VerifyException("loop.reduce: body must yield one value")
        want = i64 if self.kind.data in ("argmax", "argmin") else term.values[0].type
        if self.result.type != want:
            raise VerifyException(f"loop.reduce: result type must be {want}")

    def extents(self) -> list[int | SSAValue]:
        """Each dim's extent: an int, or the SSA value giving it."""
        return _extents(self.ranges, self.sizes)


@irdl_op_definition
class MapOp(IRDLOperation):
    """Run the body (which stores) for every point of `ranges`. An extent
    known only when the kernel runs (a kernel parameter: kernels of one body
    launched over different sizes) is DYN in `ranges`, its value the next
    of the `sizes` operands."""

    name = "loop.map"
    ranges = prop_def(DenseArrayBase.constr(i64))
    sizes = var_operand_def(IndexType)
    body = region_def("single_block")
    traits = traits_def(RecursiveMemoryEffect())
    assembly_format = "$ranges (`sizes` `(` $sizes^ `)`)? $body attr-dict"

    def __init__(self, ranges: Sequence[int], sizes: Sequence[SSAValue] = ()):
        super().__init__(
            operands=[list(sizes)],
            properties={"ranges": i64_array(ranges)},
            regions=[Region(_index_block(len(ranges)))],
        )

    def verify_(self) -> None:
        _verify_sizes(self, self.ranges, self.sizes)

    def extents(self) -> list[int | SSAValue]:
        """Each dim's extent: an int, or the SSA value giving it."""
        return _extents(self.ranges, self.sizes)


def _check_map(op: IRDLOperation, buf: SSAValue, idx: Sequence[SSAValue], m: AffineMap) -> None:
    t = buf.type
    assert isinstance(t, MemRefType)
    if m.num_dims + m.num_symbols != len(idx):
        raise VerifyException(f"{op.name}: map takes {m.num_dims} indices and {m.num_symbols} "
                              f"symbols, got {len(idx)} operands")
    if len(m.results) != t.get_num_dims():
        raise VerifyException(f"{op.name}: map gives {len(m.results)} coordinates for rank {t.get_num_dims()}")


@irdl_op_definition
class LoadOp(IRDLOperation):
    name = "loop.load"
    buffer = operand_def(AnyMemRef)
    indices = var_operand_def(IndexType)
    map = prop_def(AffineMapAttr)
    result = result_def()
    assembly_format = "$buffer `[` $map `]` `(` $indices `)` attr-dict `:` type($buffer) `->` type($result)"

    def __init__(self, buffer: SSAValue, indices: Sequence[SSAValue], map: AffineMap):
        t = buffer.type
        assert isinstance(t, MemRefType)
        super().__init__(operands=[buffer, list(indices)],
                         properties={"map": AffineMapAttr(map)}, result_types=[t.element_type])

    def verify_(self) -> None:
        _check_map(self, self.buffer, self.indices, self.map.data)
        if self.result.type != self.buffer.type.element_type:  # type: ignore[attr-defined]
            raise VerifyException("loop.load: result must be the element type")


@irdl_op_definition
class StoreOp(IRDLOperation):
    name = "loop.store"
    value = operand_def()
    buffer = operand_def(AnyMemRef)
    indices = var_operand_def(IndexType)
    map = prop_def(AffineMapAttr)
    assembly_format = "$value `,` $buffer `[` $map `]` `(` $indices `)` attr-dict `:` type($value) `,` type($buffer)"

    def __init__(self, value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue], map: AffineMap):
        super().__init__(operands=[value, buffer, list(indices)], properties={"map": AffineMapAttr(map)})

    def verify_(self) -> None:
        _check_map(self, self.buffer, self.indices, self.map.data)
        if self.value.type != self.buffer.type.element_type:  # type: ignore[attr-defined]
            raise VerifyException("loop.store: value must have the element type")


@irdl_op_definition
class ConstOp(IRDLOperation):
    """A scalar constant; `value` as in `array.constant` (exact repr)."""

    name = "loop.const"
    value = prop_def(StringAttr)
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$value attr-dict `:` type($result)"

    def __init__(self, value: str, type: Attribute):
        super().__init__(properties={"value": StringAttr(value)}, result_types=[type])


@irdl_op_definition
class UfuncOp(IRDLOperation):
    """A numpy ufunc on scalars (same names and meaning as `array.ufunc`: a row
    of the op table, dialects/ufuncs.py)."""

    name = "loop.ufunc"
    fn = prop_def(StringAttr)
    inputs = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$fn `(` $inputs `)` attr-dict `:` type($inputs) `->` type($result)"

    def __init__(self, fn: str, inputs: Sequence[SSAValue], type: Attribute):
        super().__init__(operands=[list(inputs)], properties={"fn": StringAttr(fn)}, result_types=[type])

    def verify_(self) -> None:
        verify_call(self.name, self.fn.data, len(self.inputs))


@irdl_op_definition
class CastOp(IRDLOperation):
    """numpy's scalar cast (`astype`, unsafe casting)."""

    name = "loop.cast"
    input = operand_def()
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, type: Attribute):
        super().__init__(operands=[input], result_types=[type])


@irdl_op_definition
class FlagsOp(IRDLOperation):
    """The value computed for its floating-point exception flags only
    (`array.flags` at the tensor level): nothing is stored; the emitter
    keeps the computation (the CPU's: an empty `asm` reading the value),
    and its flags come back with the kernel's."""

    name = "loop.flags"
    value = operand_def()
    traits = traits_def(FlagsEffect())
    assembly_format = "$value attr-dict `:` type($value)"

    def __init__(self, value: SSAValue):
        super().__init__(operands=[value])


@irdl_op_definition
class IndexOp(IRDLOperation):
    """A data-dependent index (numpy's `take`/fancy indexing, mode "raise"):
    the integer `value` in [-size, size) becomes an `index` in [0, size),
    negatives counted from the end. Anything else is an error of the whole
    call (IndexError naming `axis` and `size`, raised by the runtime after the
    kernel); the kernel itself goes on with index 0, so no access ever leaves
    the buffer. Loads and stores take the result as one of their indices."""

    name = "loop.index"
    value = operand_def()
    size = prop_def(IntegerAttr)
    axis = prop_def(IntegerAttr)
    result = result_def(IndexType)
    assembly_format = "$value `size` $size `axis` $axis attr-dict `:` type($value)"

    def __init__(self, value: SSAValue, size: int, axis: int):
        super().__init__(operands=[value],
                         properties={"size": IntegerAttr(size, i64), "axis": IntegerAttr(axis, i64)},
                         result_types=[IndexType()])

    def verify_(self) -> None:
        from xdsl.dialects.builtin import IntegerType

        if not isinstance(self.value.type, IntegerType):
            raise VerifyException("loop.index: the value must be an integer")


@irdl_op_definition
class ExternOp(IRDLOperation):
    """A routine outside generated code: `fn` names it (e.g. "matmul" for BLAS,
    "numpy:<tensor op>" for a tensor-level op run by numpy), reading the first
    `num_inputs` buffers and writing the rest. A numpy routine `computes` its
    tensor-level op: the body holds it, on block arguments standing for the
    inputs, and yields its results (one per output buffer). Before it, the
    body may hold views of the inputs (`views`: broadcast, transpose, slice,
    reshape) that the routine reads instead of copies of them (a matmul with
    views has a body too: the product on its views)."""

    name = "loop.extern"
    fn = prop_def(StringAttr)
    num_inputs = prop_def(IntegerAttr)
    buffers = var_operand_def(AnyMemRef)
    body = opt_region_def("single_block")
    assembly_format = ("$fn `(` $buffers `)` `inputs` $num_inputs (`computes` $body^)? attr-dict "
                       "`:` type($buffers)")

    VIEWS: ClassVar[tuple[str, ...]] = ("array.broadcast", "array.transpose", "array.slice", "array.reshape")

    def __init__(self, fn: str, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue],
                 computes: Operation | None = None,
                 views: Sequence[Sequence[Operation]] | None = None):
        """`views[i]`: the view ops, in order from the tensor value input i
        stands for out to the operand `computes` reads in its place
        (`computes`' operands in order, one chain each; empty: the input
        itself)."""
        props: dict[str, Attribute] = {"fn": StringAttr(fn), "num_inputs": IntegerAttr(len(inputs), i64)}
        regions: list = [[]]
        if computes is not None:
            chains = list(views) if views is not None else [[] for _ in computes.operands]
            sources = [c[0].operands[0] if c else o for c, o in zip(chains, computes.operands)]
            block = Block(arg_types=[o.type for o in sources])
            clone = computes.clone()
            for i, (a, chain) in enumerate(zip(block.args, chains)):
                v: SSAValue = a
                for view in chain:
                    c = view.clone()
                    c.operands[0] = v  # type: ignore[index]
                    block.add_op(c)
                    v = c.results[0]
                clone.operands[i] = v  # type: ignore[index]
            block.add_op(clone)
            block.add_op(YieldOp(*clone.results))
            regions = [Region(block)]
        super().__init__(operands=[[*inputs, *outputs]], properties=props, regions=regions)

    def computed(self) -> Operation:
        """The tensor-level op the routine computes (see `computes`)."""
        if self.body is None:
            raise ValueError(f"loop.extern {self.fn.data!r} computes no tensor-level op")
        ops = list(self.body.block.ops)
        return ops[-2]

    def views(self) -> list[Operation]:
        """The view ops before the computed one, in order."""
        if self.body is None:
            return []
        return list(self.body.block.ops)[:-2]

    def verify_(self) -> None:
        if self.body is None:
            return
        n = self.num_inputs.value.data
        block = self.body.block
        ops = list(block.ops)
        if len(block.args) != n or len(ops) < 2 or not isinstance(ops[-1], YieldOp):
            raise VerifyException("loop.extern: the body is views, one op on the inputs, then loop.yield")
        if len(ops[-1].values) != len(self.buffers) - n:
            raise VerifyException("loop.extern: the body yields one value per output buffer")
        known = set(block.args)
        for v in ops[:-2]:
            if v.name not in self.VIEWS or len(v.operands) != 1 or v.operands[0] not in known:
                raise VerifyException("loop.extern: before its op the body holds only views of its inputs")
            known.update(v.results)
        if any(o not in known for o in ops[-2].operands):
            raise VerifyException("loop.extern: the computed op reads only the body's arguments and their views")


Loop = Dialect("loop", [YieldOp, KernelOp, ReduceOp, MapOp, LoadOp, StoreOp, ConstOp, UfuncOp,
                        CastOp, FlagsOp, IndexOp, ExternOp], [])
