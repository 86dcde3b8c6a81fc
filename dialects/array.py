"""The tensor level: `array`, value-semantics operations on numpy-like arrays.

Element-wise arithmetic uses the upstream `arith` and `math` dialects on tensor
operands wherever their meaning equals numpy's. This dialect holds only what
upstream lacks or defines differently: explicit broadcasting and casting (numpy's
`astype`), comparisons and selects producing/consuming `tensor<...xi1>` (upstream
`arith.cmpf`/`arith.select` are scalar-only in xDSL), the structural operations
(reshape, transpose, slices, pads, concatenation, gathers, scatters), reductions,
scans, batched matmul, iotas, constants, `array.ufunc`, which stands for a numpy
ufunc with numpy's exact semantics when no upstream operation has them (e.g.
`floor_divide` of integers by zero, `hypot`, `logaddexp`), and `array.routine`, a
numpy routine (sort, LAPACK, FFT) whose result shapes follow from its operands'.

Types are the builtin `tensor<...>` with static or dynamic (`?`) dims. Element types:
f16/bf16/f32/f64, signless integers i8..i64 (numpy's signed integers), `ui*` for
numpy's unsigned integers, and i1 for bool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    NoneType,
    StringAttr,
    TensorType,
    UnitAttr,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import EffectInstance, MemoryEffect, MemoryEffectKind, Pure, Resource
from xdsl.utils.exceptions import VerifyException

from .symbols import SymDim, hint
from .ufuncs import verify_call

AnyTensor = base(TensorType)
DYN = DYNAMIC_INDEX

REDUCE_KINDS = ("sum", "prod", "max", "min", "any", "all")
ARGREDUCE_KINDS = ("argmax", "argmin")
SCAN_KINDS = ("sum", "prod", "max", "min")
COMPARE_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")
SCATTER_MODES = ("set", "add")

# a function result's attribute: the index of the argument (a caller's
# array) that the result is written back into once the call succeeded
# (`x *= y` as a pure function returns x's new value); lower-to-loop may
# compute it in that argument's buffer
WRITES_ATTR = "lowering.writes"


def written_results(f) -> dict[int, int]:
    """Result index -> argument index, from a `func.func`'s WRITES_ATTR."""
    out: dict[int, int] = {}
    for k, d in enumerate(f.res_attrs.data if f.res_attrs is not None else ()):
        a = d.data.get(WRITES_ATTR)
        if a is not None:
            out[k] = a.value.data
    return out


def tensor_of(value: SSAValue) -> TensorType:
    t = value.type
    if not isinstance(t, TensorType):
        raise VerifyException(f"expected a tensor, got {t}")
    return t


def ints(attr: DenseArrayBase) -> tuple[int, ...]:
    """The values of an i64 array (its size symbols kept: see `i64_array`)."""
    sym = getattr(attr, "_symbolic", None)
    return sym if sym is not None else tuple(int(v) for v in attr.get_values())


def i64_array(values: Sequence[int]) -> DenseArrayBase:
    """An i64 array attribute. Its storage is bytes, which would drop the
    expressions of symbolic sizes (`dialects.symbols.SymDim`): an array
    holding one keeps its values as given too, for `ints` to read."""
    values = list(values)
    attr = DenseArrayBase.from_list(i64, [hint(v) for v in values])
    if any(isinstance(v, SymDim) for v in values):
        object.__setattr__(attr, "_symbolic", tuple(values))
    return attr


def dims_agree(a: int, b: int) -> bool:
    return a == DYN or b == DYN or a == b


def _check_elem(op: IRDLOperation, a: TensorType, b: TensorType, what: str) -> None:
    if a.element_type != b.element_type:
        raise VerifyException(
            f"{op.name}: {what} element type {b.element_type} differs from "
            f"{a.element_type}"
        )


def _check_shape(op: IRDLOperation, want: Sequence[int], got: TensorType) -> None:
    shape = got.get_shape()
    if len(want) != len(shape) or not all(map(dims_agree, want, shape)):
        raise VerifyException(
            f"{op.name}: result shape {list(shape)} should be {list(want)}"
        )


class _ArrayOp(IRDLOperation):
    traits = traits_def(Pure())


class NumpyErrors(Resource):
    """What an op that can raise numpy's error at run time (an index out of
    range, a singular matrix) writes: the call's outcome."""

    def name(self) -> str:
        return "<numpy errors>"


_RAISES = frozenset((EffectInstance(MemoryEffectKind.WRITE, resource=NumpyErrors()),))


class MayRaise(MemoryEffect):
    """An op that can raise numpy's error on the values it is given (`may_raise`:
    a routine by its name). numpy raises even where the result is unused, so
    an unused one has an effect (a write to `NumpyErrors`) and no dead-code
    elimination removes it (xDSL's DCE, the pattern rewriter's, CSE's: all
    ask the effects); the loop level makes it a kernel that only checks.
    While its result is used, its users keep it and it has no effect: CSE
    merges two identical ones (they raise together; capture's own index
    checks repeat one per use). It is never speculatable."""

    @classmethod
    def get_effects(cls, op) -> frozenset[EffectInstance]:
        if any(r.first_use is not None for r in op.results) or not may_raise(op):
            return frozenset()
        return _RAISES


class FlagsEffect(MemoryEffect):
    """`array.flags`: always the write of `NumpyErrors` (its flags are the
    call's outcome)."""

    @classmethod
    def get_effects(cls, op) -> frozenset[EffectInstance]:
        return _RAISES


class _CheckedOp(IRDLOperation):
    traits = traits_def(MayRaise())


@irdl_op_definition
class ConstantOp(_ArrayOp):
    """A constant array. `value` is a splat written as Python's float/int repr
    (`nan`, `-inf`, `-0.0` round-trip exactly), or `bytes:<hex>` holding the
    little-endian C-order data of a dense array."""

    name = "array.constant"
    value = prop_def(StringAttr)
    result = result_def(AnyTensor)
    assembly_format = "$value attr-dict `:` type($result)"

    def __init__(self, value: str, type: TensorType):
        super().__init__(properties={"value": StringAttr(value)}, result_types=[type])

    def verify_(self) -> None:
        t = tensor_of(self.result)
        v = self.value.data
        if v.startswith("bytes:") and not t.has_static_shape():
            raise VerifyException("array.constant: dense data needs a static shape")


@irdl_op_definition
class BroadcastOp(_ArrayOp):
    """numpy's `broadcast_to`: dims aligned on the right, size-1 dims repeated."""

    name = "array.broadcast"
    input = operand_def(AnyTensor)
    result = result_def(AnyTensor)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, type: TensorType):
        super().__init__(operands=[input], result_types=[type])

    def verify_(self) -> None:
        src, dst = tensor_of(self.input), tensor_of(self.result)
        _check_elem(self, src, dst, "result")
        s, d = src.get_shape(), dst.get_shape()
        if len(s) > len(d):
            raise VerifyException(f"array.broadcast: cannot lower rank {len(s)} to {len(d)}")
        for a, b in zip(s[::-1], d[::-1]):
            if not (a == 1 or dims_agree(a, b)):
                raise VerifyException(f"array.broadcast: dim {a} cannot broadcast to {b}")


@irdl_op_definition
class CastOp(_ArrayOp):
    """numpy's `astype(..., casting="unsafe")`: float→int truncates toward zero,
    anything→bool is `!= 0`, bool→number is 0/1, int narrowing wraps."""

    name = "array.cast"
    input = operand_def(AnyTensor)
    result = result_def(AnyTensor)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, type: TensorType):
        super().__init__(operands=[input], result_types=[type])

    def verify_(self) -> None:
        src, dst = tensor_of(self.input), tensor_of(self.result)
        if len(src.get_shape()) != len(dst.get_shape()):
            raise VerifyException("array.cast: rank changes")
        _check_shape(self, src.get_shape(), dst)


@irdl_op_definition
class ReshapeOp(_ArrayOp):
    """Row-major (C order) reshape; the element count is unchanged."""

    name = "array.reshape"
    input = operand_def(AnyTensor)
    result = result_def(AnyTensor)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, type: TensorType):
        super().__init__(operands=[input], result_types=[type])

    def verify_(self) -> None:
        src, dst = tensor_of(self.input), tensor_of(self.result)
        _check_elem(self, src, dst, "result")
        if src.has_static_shape() and dst.has_static_shape():
            n = m = 1
            for d in src.get_shape():
                n *= d
            for d in dst.get_shape():
                m *= d
            if n != m:
                raise VerifyException(f"array.reshape: {n} elements cannot become {m}")


@irdl_op_definition
class TransposeOp(_ArrayOp):
    """result.shape[i] = input.shape[permutation[i]]."""

    name = "array.transpose"
    input = operand_def(AnyTensor)
    permutation = prop_def(DenseArrayBase.constr(i64))
    result = result_def(AnyTensor)
    assembly_format = "$input $permutation attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, permutation: Sequence[int], type: TensorType):
        super().__init__(
            operands=[input],
            properties={"permutation": i64_array(permutation)},
            result_types=[type],
        )

    def verify_(self) -> None:
        src = tensor_of(self.input)
        perm = ints(self.permutation)
        if sorted(perm) != list(range(src.get_num_dims())):
            raise VerifyException(f"array.transpose: {list(perm)} is not a permutation")
        _check_elem(self, src, tensor_of(self.result), "result")
        _check_shape(self, [src.get_shape()[p] for p in perm], tensor_of(self.result))


def _check_slice(op: IRDLOperation, src: TensorType, view: TensorType,
                 start: tuple[int, ...], step: tuple[int, ...]) -> None:
    shape = src.get_shape()
    if not (len(start) == len(step) == len(shape) == view.get_num_dims()):
        raise VerifyException(f"{op.name}: start/step/rank mismatch")
    for d, (n, b, s, m) in enumerate(zip(shape, start, step, view.get_shape())):
        if s == 0:
            raise VerifyException(f"{op.name}: step 0 in dim {d}")
        if n == DYN or m == DYN or m == 0:
            continue
        last = b + (m - 1) * s
        if not (0 <= b < n and 0 <= last < n):
            raise VerifyException(
                f"{op.name}: dim {d} reads [{b}, {last}] outside 0..{n - 1}"
            )


@irdl_op_definition
class SliceOp(_ArrayOp):
    """Strided window: result[i] = input[start + i*step] per dim (steps may be
    negative); the result type gives the number of elements per dim."""

    name = "array.slice"
    input = operand_def(AnyTensor)
    start = prop_def(DenseArrayBase.constr(i64))
    step = prop_def(DenseArrayBase.constr(i64))
    result = result_def(AnyTensor)
    assembly_format = (
        "$input `[` $start `,` $step `]` attr-dict `:` type($input) `->` type($result)"
    )

    def __init__(self, input: SSAValue, start: Sequence[int], step: Sequence[int],
                 type: TensorType):
        super().__init__(
            operands=[input],
            properties={"start": i64_array(start), "step": i64_array(step)},
            result_types=[type],
        )

    def verify_(self) -> None:
        src, dst = tensor_of(self.input), tensor_of(self.result)
        _check_elem(self, src, dst, "result")
        _check_slice(self, src, dst, ints(self.start), ints(self.step))


@irdl_op_definition
class InsertSliceOp(_ArrayOp):
    """Functional slice assignment: `dest` with the window of `array.slice`
    (same start/step, window shape = source shape) replaced by `source`."""

    name = "array.insert_slice"
    T: ClassVar = VarConstraint("T", AnyTensor)
    source = operand_def(AnyTensor)
    dest = operand_def(T)
    start = prop_def(DenseArrayBase.constr(i64))
    step = prop_def(DenseArrayBase.constr(i64))
    result = result_def(T)
    assembly_format = (
        "$source `into` $dest `[` $start `,` $step `]` attr-dict `:` type($source) "
        "`into` type($dest)"
    )

    def __init__(self, source: SSAValue, dest: SSAValue, start: Sequence[int],
                 step: Sequence[int]):
        super().__init__(
            operands=[source, dest],
            properties={"start": i64_array(start), "step": i64_array(step)},
            result_types=[dest.type],
        )

    def verify_(self) -> None:
        src, dst = tensor_of(self.source), tensor_of(self.dest)
        _check_elem(self, dst, src, "source")
        if self.result.type != dst:
            raise VerifyException("array.insert_slice: result type must equal dest type")
        _check_slice(self, dst, src, ints(self.start), ints(self.step))


@irdl_op_definition
class PadOp(_ArrayOp):
    """Constant padding: `low[d]` and `high[d]` elements of `pad_value` (0-d)."""

    name = "array.pad"
    input = operand_def(AnyTensor)
    pad_value = operand_def(AnyTensor)
    low = prop_def(DenseArrayBase.constr(i64))
    high = prop_def(DenseArrayBase.constr(i64))
    result = result_def(AnyTensor)
    assembly_format = (
        "$input `low` $low `high` $high `value` $pad_value attr-dict `:` "
        "type($input) `,` type($pad_value) `->` type($result)"
    )

    def __init__(self, input: SSAValue, pad_value: SSAValue, low: Sequence[int],
                 high: Sequence[int], type: TensorType):
        super().__init__(
            operands=[input, pad_value],
            properties={"low": i64_array(low), "high": i64_array(high)},
            result_types=[type],
        )

    def verify_(self) -> None:
        src, pv, dst = tensor_of(self.input), tensor_of(self.pad_value), tensor_of(self.result)
        _check_elem(self, src, dst, "result")
        _check_elem(self, src, pv, "pad value")
        if pv.get_num_dims() != 0:
            raise VerifyException("array.pad: pad value must be 0-d")
        lo, hi = ints(self.low), ints(self.high)
        shape = src.get_shape()
        if not len(lo) == len(hi) == len(shape):
            raise VerifyException("array.pad: low/high must have one entry per dim")
        if min(lo + hi, default=0) < 0:
            raise VerifyException("array.pad: negative padding")
        want = [DYN if n == DYN else n + a + b for n, a, b in zip(shape, lo, hi)]
        _check_shape(self, want, dst)


@irdl_op_definition
class ConcatOp(_ArrayOp):
    """numpy's `concatenate` along `axis`."""

    name = "array.concat"
    inputs = var_operand_def(AnyTensor)
    axis = prop_def(IntegerAttr)
    result = result_def(AnyTensor)
    assembly_format = "$inputs `axis` $axis attr-dict `:` type($inputs) `->` type($result)"

    def __init__(self, inputs: Sequence[SSAValue], axis: int, type: TensorType):
        super().__init__(
            operands=[inputs],
            properties={"axis": IntegerAttr(axis, i64)},
            result_types=[type],
        )

    def verify_(self) -> None:
        ts = [tensor_of(v) for v in self.inputs]
        dst = tensor_of(self.result)
        if not ts:
            raise VerifyException("array.concat: needs at least one input")
        ax = self.axis.value.data
        rank = dst.get_num_dims()
        if not 0 <= ax < rank:
            raise VerifyException(f"array.concat: axis {ax} out of range for rank {rank}")
        total = 0
        for t in ts:
            _check_elem(self, dst, t, "input")
            if t.get_num_dims() != rank:
                raise VerifyException("array.concat: inputs must have the result's rank")
            for d, (a, b) in enumerate(zip(t.get_shape(), dst.get_shape())):
                if d != ax and not dims_agree(a, b):
                    raise VerifyException(f"array.concat: dim {d} differs ({a} vs {b})")
            n = t.get_shape()[ax]
            total = DYN if DYN in (n, total) else total + n
        if not dims_agree(total, dst.get_shape()[ax]):
            raise VerifyException(f"array.concat: axis sizes add to {total}")


@irdl_op_definition
class GatherOp(_CheckedOp):
    """numpy's `take(input, indices, axis)` with mode="raise": indices in
    [-n, n) pick along `axis`; the result's shape is input.shape with that dim
    replaced by indices.shape. Out-of-range indices are a runtime error."""

    name = "array.gather"
    input = operand_def(AnyTensor)
    indices = operand_def(AnyTensor)
    axis = prop_def(IntegerAttr)
    result = result_def(AnyTensor)
    assembly_format = (
        "$input `[` $indices `]` `axis` $axis attr-dict `:` type($input) `,` "
        "type($indices) `->` type($result)"
    )

    def __init__(self, input: SSAValue, indices: SSAValue, axis: int, type: TensorType):
        super().__init__(
            operands=[input, indices],
            properties={"axis": IntegerAttr(axis, i64)},
            result_types=[type],
        )

    def verify_(self) -> None:
        src, idx, dst = tensor_of(self.input), tensor_of(self.indices), tensor_of(self.result)
        _check_elem(self, src, dst, "result")
        if not isinstance(idx.element_type, IntegerType) or idx.element_type == i1:
            raise VerifyException("array.gather: indices must be integers")
        ax = self.axis.value.data  # type: ignore[attr-defined]
        s = src.get_shape()
        if not 0 <= ax < len(s):
            raise VerifyException(f"array.gather: axis {ax} out of range")
        _check_shape(self, [*s[:ax], *idx.get_shape(), *s[ax + 1:]], dst)


@irdl_op_definition
class ScatterOp(_CheckedOp):
    """Functional `dest[(:,)*axis, indices] = updates` (mode "set", numpy's
    last-write-wins for duplicate indices) or `np.add.at` (mode "add").
    `updates` has the gather result's shape."""

    name = "array.scatter"
    T: ClassVar = VarConstraint("T", AnyTensor)
    dest = operand_def(T)
    indices = operand_def(AnyTensor)
    updates = operand_def(AnyTensor)
    axis = prop_def(IntegerAttr)
    mode = prop_def(StringAttr)
    result = result_def(T)
    assembly_format = (
        "$updates `into` $dest `[` $indices `]` `axis` $axis `mode` $mode attr-dict "
        "`:` type($updates) `,` type($indices) `into` type($dest)"
    )

    def __init__(self, dest: SSAValue, indices: SSAValue, updates: SSAValue, axis: int,
                 mode: str):
        super().__init__(
            operands=[dest, indices, updates],
            properties={"axis": IntegerAttr(axis, i64), "mode": StringAttr(mode)},
            result_types=[dest.type],
        )

    def verify_(self) -> None:
        dst, idx, upd = tensor_of(self.dest), tensor_of(self.indices), tensor_of(self.updates)
        _check_elem(self, dst, upd, "updates")
        if self.mode.data not in SCATTER_MODES:
            raise VerifyException(f"array.scatter: mode must be one of {SCATTER_MODES}")
        ax = self.axis.value.data  # type: ignore[attr-defined]
        s = dst.get_shape()
        if not 0 <= ax < len(s):
            raise VerifyException(f"array.scatter: axis {ax} out of range")
        _check_shape(self, [*s[:ax], *idx.get_shape(), *s[ax + 1:]], upd)


@irdl_op_definition
class ReduceOp(_ArrayOp):
    """Reduction over `axes` (removed from the shape). max/min propagate NaN
    like numpy; any/all take i1. Empty sum/prod give 0/1; empty max/min are
    rejected at capture as numpy rejects them."""

    name = "array.reduce"
    input = operand_def(AnyTensor)
    kind = prop_def(StringAttr)
    axes = prop_def(DenseArrayBase.constr(i64))
    result = result_def(AnyTensor)
    assembly_format = "$kind $input $axes attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, kind: str, axes: Sequence[int], type: TensorType):
        super().__init__(
            operands=[input],
            properties={"kind": StringAttr(kind), "axes": i64_array(axes)},
            result_types=[type],
        )

    def verify_(self) -> None:
        src, dst = tensor_of(self.input), tensor_of(self.result)
        if self.kind.data not in REDUCE_KINDS:
            raise VerifyException(f"array.reduce: kind must be one of {REDUCE_KINDS}")
        _check_elem(self, src, dst, "result")
        axes = ints(self.axes)
        shape = src.get_shape()
        if len(set(axes)) != len(axes) or not all(0 <= a < len(shape) for a in axes):
            raise VerifyException(f"array.reduce: bad axes {list(axes)} for rank {len(shape)}")
        _check_shape(self, [n for d, n in enumerate(shape) if d not in axes], dst)


@irdl_op_definition
class ArgReduceOp(_ArrayOp):
    """argmax/argmin along one axis; first occurrence wins; a NaN wins over any
    number (numpy). Result is i64."""

    name = "array.argreduce"
    input = operand_def(AnyTensor)
    kind = prop_def(StringAttr)
    axis = prop_def(IntegerAttr)
    result = result_def(AnyTensor)
    assembly_format = "$kind $input `axis` $axis attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, kind: str, axis: int, type: TensorType):
        super().__init__(
            operands=[input],
            properties={"kind": StringAttr(kind), "axis": IntegerAttr(axis, i64)},
            result_types=[type],
        )

    def verify_(self) -> None:
        src, dst = tensor_of(self.input), tensor_of(self.result)
        if self.kind.data not in ARGREDUCE_KINDS:
            raise VerifyException(f"array.argreduce: kind must be one of {ARGREDUCE_KINDS}")
        if dst.element_type != i64:
            raise VerifyException("array.argreduce: result must be i64")
        ax = self.axis.value.data  # type: ignore[attr-defined]
        shape = src.get_shape()
        if not 0 <= ax < len(shape):
            raise VerifyException(f"array.argreduce: axis {ax} out of range")
        _check_shape(self, [n for d, n in enumerate(shape) if d != ax], dst)


@irdl_op_definition
class ScanOp(_ArrayOp):
    """Inclusive prefix sum, product, maximum or minimum along `axis`
    (numpy's `add`/`multiply`/`maximum`/`minimum.accumulate`)."""

    name = "array.scan"
    T: ClassVar = VarConstraint("T", AnyTensor)
    input = operand_def(T)
    kind = prop_def(StringAttr)
    axis = prop_def(IntegerAttr)
    result = result_def(T)
    assembly_format = "$kind $input `axis` $axis attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, kind: str, axis: int):
        super().__init__(
            operands=[input],
            properties={"kind": StringAttr(kind), "axis": IntegerAttr(axis, i64)},
            result_types=[input.type],
        )

    def verify_(self) -> None:
        src = tensor_of(self.input)
        if self.kind.data not in SCAN_KINDS:
            raise VerifyException(f"array.scan: kind must be one of {SCAN_KINDS}")
        if self.result.type != src:
            raise VerifyException("array.scan: result type must equal input type")
        ax = self.axis.value.data  # type: ignore[attr-defined]
        if not 0 <= ax < src.get_num_dims():
            raise VerifyException(f"array.scan: axis {ax} out of range")


@irdl_op_definition
class DotOp(_ArrayOp):
    """Batched matmul: (B..., M, K) x (B..., K, N) -> (B..., M, N), batch dims
    equal (broadcasting is explicit), one element type."""

    name = "array.dot"
    lhs = operand_def(AnyTensor)
    rhs = operand_def(AnyTensor)
    result = result_def(AnyTensor)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, type: TensorType):
        super().__init__(operands=[lhs, rhs], result_types=[type])

    def verify_(self) -> None:
        a, b, c = tensor_of(self.lhs), tensor_of(self.rhs), tensor_of(self.result)
        _check_elem(self, a, b, "rhs")
        _check_elem(self, a, c, "result")
        sa, sb = a.get_shape(), b.get_shape()
        if len(sa) < 2 or len(sa) != len(sb):
            raise VerifyException("array.dot: operands need equal rank >= 2")
        if not all(map(dims_agree, sa[:-2], sb[:-2])):
            raise VerifyException("array.dot: batch dims differ")
        if not dims_agree(sa[-1], sb[-2]):
            raise VerifyException(f"array.dot: contraction {sa[-1]} vs {sb[-2]}")
        _check_shape(self, [*sa[:-1], sb[-1]], c)


@irdl_op_definition
class IotaOp(_ArrayOp):
    """result[..., i, ...] = i along `dimension`, converted to the element type."""

    name = "array.iota"
    dimension = prop_def(IntegerAttr)
    result = result_def(AnyTensor)
    assembly_format = "`dim` $dimension attr-dict `:` type($result)"

    def __init__(self, dimension: int, type: TensorType):
        super().__init__(
            properties={"dimension": IntegerAttr(dimension, i64)}, result_types=[type]
        )

    def verify_(self) -> None:
        d = self.dimension.value.data  # type: ignore[attr-defined]
        if not 0 <= d < tensor_of(self.result).get_num_dims():
            raise VerifyException(f"array.iota: dimension {d} out of range")


@irdl_op_definition
class SelectOp(_ArrayOp):
    """numpy's 3-argument `where`, operands already broadcast to one shape."""

    name = "array.select"
    T: ClassVar = VarConstraint("T", AnyTensor)
    cond = operand_def(AnyTensor)
    on_true = operand_def(T)
    on_false = operand_def(T)
    result = result_def(T)
    assembly_format = (
        "$cond `,` $on_true `,` $on_false attr-dict `:` type($cond) `,` type($on_true)"
    )

    def __init__(self, cond: SSAValue, on_true: SSAValue, on_false: SSAValue):
        super().__init__(operands=[cond, on_true, on_false], result_types=[on_true.type])

    def verify_(self) -> None:
        c, a, b = tensor_of(self.cond), tensor_of(self.on_true), tensor_of(self.on_false)
        if c.element_type != i1:
            raise VerifyException("array.select: condition must be i1")
        if a != b or self.result.type != a:
            raise VerifyException("array.select: branch types must equal the result type")
        _check_shape(self, a.get_shape(), c)


@irdl_op_definition
class CompareOp(_ArrayOp):
    """Element-wise comparison producing i1, numpy's meaning: any comparison
    with NaN is false except `ne`."""

    name = "array.compare"
    predicate = prop_def(StringAttr)
    T: ClassVar = VarConstraint("T", AnyTensor)
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(AnyTensor)
    assembly_format = "$predicate $lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)"

    def __init__(self, predicate: str, lhs: SSAValue, rhs: SSAValue):
        t = tensor_of(lhs)
        super().__init__(
            operands=[lhs, rhs],
            properties={"predicate": StringAttr(predicate)},
            result_types=[TensorType(i1, t.get_shape())],
        )

    def verify_(self) -> None:
        a, b, c = tensor_of(self.lhs), tensor_of(self.rhs), tensor_of(self.result)
        if self.predicate.data not in COMPARE_PREDICATES:
            raise VerifyException(f"array.compare: predicate must be one of {COMPARE_PREDICATES}")
        if a != b:
            raise VerifyException("array.compare: operand types differ")
        if c.element_type != i1:
            raise VerifyException("array.compare: result must be i1")
        _check_shape(self, a.get_shape(), c)


@irdl_op_definition
class UfuncOp(_ArrayOp):
    """A numpy ufunc by name (a row of the op table, dialects/ufuncs.py, with
    its `nin` inputs), with numpy's semantics for the operand dtypes. Operands
    share one shape (broadcasting is explicit) and are already cast to the
    ufunc loop's input dtypes. Capture emits this for every ufunc call; the
    `decompose` pass rewrites it into upstream `arith`/`math` where those have
    numpy's meaning and keeps it where they do not."""

    name = "array.ufunc"
    fn = prop_def(StringAttr)
    inputs = var_operand_def(AnyTensor)
    result = result_def(AnyTensor)
    assembly_format = "$fn `(` $inputs `)` attr-dict `:` type($inputs) `->` type($result)"

    def __init__(self, fn: str, inputs: Sequence[SSAValue], type: TensorType):
        super().__init__(
            operands=[inputs], properties={"fn": StringAttr(fn)}, result_types=[type]
        )

    def verify_(self) -> None:
        dst = tensor_of(self.result)
        if not self.inputs:
            raise VerifyException("array.ufunc: needs inputs")
        verify_call(self.name, self.fn.data, len(self.inputs))
        for v in self.inputs:
            _check_shape(self, tensor_of(v).get_shape(), dst)


# numpy routines `array.routine` may name: their results' shapes follow from the
# operands' shapes and the static keyword arguments
ROUTINES = frozenset("""
np.sort np.argsort np.partition np.argpartition np.searchsorted
np.linalg.norm np.linalg.solve np.linalg.inv np.linalg.det np.linalg.slogdet
np.linalg.cholesky np.linalg.qr np.linalg.svd np.linalg.eigh np.linalg.eigvalsh
np.linalg.lstsq np.linalg.pinv np.linalg.matrix_rank
np.fft.irfft np.fft.irfft2 np.fft.irfftn np.fft.hfft
np.fft.fft np.fft.ifft np.fft.rfft np.fft.ihfft np.fft.fft2 np.fft.ifft2 np.fft.rfft2
np.fft.fftn np.fft.ifftn np.fft.rfftn
np.ufunc np.real np.imag np.getitem
""".split())


# the routines numpy can raise in on the values (not the shapes: those are
# checked when traced): a singular or not positive-definite matrix, an SVD or
# eigensolver that does not converge (a NaN)
RAISING_ROUTINES = frozenset("""
np.linalg.solve np.linalg.inv np.linalg.cholesky np.linalg.svd np.linalg.eigh
np.linalg.eigvalsh np.linalg.lstsq np.linalg.pinv np.linalg.matrix_rank np.linalg.norm
""".split())
assert RAISING_ROUTINES <= ROUTINES


def may_raise(op) -> bool:
    """Whether `op` can raise numpy's error at run time: a gather or scatter
    (an index out of range), a routine of `RAISING_ROUTINES`."""
    if isinstance(op, RoutineOp):
        return op.fn.data in RAISING_ROUTINES
    return isinstance(op, (GatherOp, ScatterOp))


def _config_value_ok(a: Attribute) -> bool:
    if isinstance(a, ArrayAttr):
        return all(_config_value_ok(x) for x in a.data)
    return isinstance(a, (IntegerAttr, FloatAttr, StringAttr, NoneType))


def config_attr(value: object) -> Attribute:
    """A static keyword argument (None, bool, int, float, str, tuples of those)
    as the attribute `array.routine`'s config holds."""
    if value is None:
        return NoneType()
    if isinstance(value, bool):
        return BoolAttr.from_bool(value)
    if isinstance(value, int):
        return IntegerAttr(value, i64)
    if isinstance(value, float):
        return FloatAttr(value, f64)
    if isinstance(value, str):
        return StringAttr(value)
    if isinstance(value, (tuple, list)):
        return ArrayAttr([config_attr(v) for v in value])
    raise TypeError(f"a static argument must be None, a bool, int, float, str or a tuple of "
                    f"those, got {type(value).__name__}")


def config_value(a: Attribute) -> object:
    """The inverse of `config_attr` (arrays become tuples)."""
    if isinstance(a, NoneType):
        return None
    if isinstance(a, IntegerAttr):
        t = a.type
        v = a.value.data
        return bool(v) if isinstance(t, IntegerType) and t.width.data == 1 else int(v)
    if isinstance(a, FloatAttr):
        return float(a.value.data)
    if isinstance(a, StringAttr):
        return a.data
    if isinstance(a, ArrayAttr):
        return tuple(config_value(x) for x in a.data)
    raise VerifyException(f"unexpected config attribute {a}")


@irdl_op_definition
class RoutineOp(_CheckedOp):
    """A numpy routine run as numpy runs it (on CPU the very numpy/LAPACK
    call): `fn` is its numpy name (`np.linalg.svd`), `config` its static
    keyword arguments (ints, floats, strings, bools, none, arrays of those),
    the operands its array arguments in order. Results are the routine's
    results in numpy's order (a namedtuple's fields: `SVDResult` is U, S, Vh),
    each already in numpy's result dtype and shape."""

    name = "array.routine"
    fn = prop_def(StringAttr)
    config = prop_def(DictionaryAttr)
    inputs = var_operand_def(AnyTensor)
    outputs = var_result_def(AnyTensor)
    assembly_format = (
        "$fn `(` $inputs `)` `config` $config attr-dict `:` functional-type($inputs, $outputs)"
    )

    def __init__(self, fn: str, inputs: Sequence[SSAValue], config: dict[str, object],
                 types: Sequence[TensorType]):
        attrs = {k: v if isinstance(v, Attribute) else config_attr(v) for k, v in config.items()}
        super().__init__(
            operands=[list(inputs)],
            properties={"fn": StringAttr(fn), "config": DictionaryAttr(attrs)},
            result_types=[list(types)],
        )

    def kwargs(self) -> dict[str, object]:
        """The static keyword arguments, as Python values."""
        return {k: config_value(v) for k, v in self.config.data.items()}

    def verify_(self) -> None:
        if self.fn.data not in ROUTINES:
            raise VerifyException(f"array.routine: unknown routine {self.fn.data!r}")
        if not self.inputs or not self.outputs:
            raise VerifyException(f"array.routine {self.fn.data}: needs operands and results")
        for k, a in self.config.data.items():
            if not _config_value_ok(a):
                raise VerifyException(
                    f"array.routine {self.fn.data}: config {k} = {a} is not an int, float, "
                    "string, bool, none or an array of those")
        for v in (*self.inputs, *self.outputs):
            tensor_of(v)


@irdl_op_definition
class FlagsOp(IRDLOperation):
    """The values of ops nobody uses, computed for their floating-point
    exception flags only: numpy computes an unused `x / y` all the same and
    warns or raises on it as `np.errstate` says (`passes/keep_flags.py`
    puts them here). It writes the call's outcome (`NumpyErrors`), so no
    dead-code elimination removes it or what it reads; below the tensor
    level its operands are computed in kernels that store nothing
    (`loop.flags`)."""

    name = "array.flags"
    inputs = var_operand_def(AnyTensor)
    traits = traits_def(FlagsEffect())
    assembly_format = "$inputs attr-dict `:` type($inputs)"

    def __init__(self, inputs: Sequence[SSAValue]):
        super().__init__(operands=[list(inputs)])


def _kind(t: Attribute) -> str:
    """"f" for a float or complex element type, "b" for bool, "i" for other
    integers."""
    el = t.element_type if isinstance(t, TensorType) else t
    if isinstance(el, IntegerType):
        return "b" if el.width.data == 1 else "i"
    return "f"


_FLOAT_BITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}


def fp_flags(op: Operation) -> frozenset[str]:
    """The `np.errstate` categories ("divide", "over", "under", "invalid")
    numpy can raise computing `op` on its operands' types: a ufunc's by the
    op table's `fpe` column (dialects/ufuncs.py), a reduction or scan by the
    ufunc it folds with (sum: add, prod: multiply), a product by add's and
    multiply's, a cast by numpy's casts (float to integer: invalid; to a
    narrower float: over and under; an integer to float16: over), a numpy
    routine on floats by any. Structural ops, comparisons and selects raise
    none."""
    from .ufuncs import FPE_CATEGORIES, UFUNCS, of_op

    if not op.operands:
        return frozenset()
    kinds = {_kind(o.type) for o in op.operands}
    integer = "f" not in kinds
    u = of_op(op)
    if u is not None:
        return u.fpe(integer)
    if isinstance(op, (ReduceOp, ScanOp)):
        folds = {"sum": "add", "prod": "multiply"}.get(op.kind.data)
        return UFUNCS[folds].fpe(integer) if folds is not None else frozenset()
    if isinstance(op, DotOp):
        return UFUNCS["add"].fpe(integer) | UFUNCS["multiply"].fpe(integer)
    if isinstance(op, CastOp):
        src, dst = op.input.type.element_type, op.result.type.element_type
        if _kind(src) == "f" and _kind(dst) == "i":
            return frozenset({"invalid"})
        if _kind(src) == "f" and _kind(dst) == "f" and (
                _FLOAT_BITS.get(str(dst), 64) < _FLOAT_BITS.get(str(src), 64)):
            return frozenset({"over", "under"})
        if _kind(src) == "i" and _FLOAT_BITS.get(str(dst)) == 16:
            return frozenset({"over"})
        return frozenset()
    if isinstance(op, RoutineOp):
        return frozenset() if integer else frozenset(FPE_CATEGORIES)
    return frozenset()


def raises_on_values(op: Operation) -> bool:
    """Whether numpy can raise an exception (not a floating-point flag)
    computing `op` on some values of its operands, whatever `np.errstate`
    says: a numpy routine run as numpy runs it (`np.linalg.inv` of a
    singular matrix: LinAlgError), a ufunc of `RAISES_ON_INTEGERS` on
    integers (`x ** -1`: ValueError). Such an op is never dropped for being
    unused or read in part (passes/keep_flags.py)."""
    from .ufuncs import RAISES_ON_INTEGERS

    if isinstance(op, RoutineOp):
        return True
    if op.name in ("array.ufunc", "loop.ufunc") and op.fn.data in RAISES_ON_INTEGERS:
        return all(_kind(o.type) in "iu" for o in op.operands)
    return False


ARRAY_OPS = [
    ConstantOp,
    BroadcastOp,
    CastOp,
    ReshapeOp,
    TransposeOp,
    SliceOp,
    InsertSliceOp,
    PadOp,
    ConcatOp,
    GatherOp,
    ScatterOp,
    ReduceOp,
    ArgReduceOp,
    ScanOp,
    DotOp,
    IotaOp,
    SelectOp,
    CompareOp,
    UfuncOp,
    RoutineOp,
    FlagsOp,
]

Array = Dialect("array", ARRAY_OPS, [])
