"""Emitters for the tensor-level primitives, at the SSA level. Every rule in
`capture/rules/` builds its result from these; nothing else creates ops."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, StringAttr, TensorType
from xdsl.ir import Block, Operation, SSAValue

from dialects import array as A

from .dtypes import ExternOnlyError, from_ir, is_extern_only_type, tensor_type
from .dtypes import kind as dtype_kind
from .symbols import SymDim, constant_text, hint, same_shape


def shape_of(v: SSAValue) -> tuple[int, ...]:
    return v.type.get_shape()  # type: ignore[attr-defined]


def dtype_of(v: SSAValue) -> np.dtype:
    return from_ir(v.type.element_type)  # type: ignore[attr-defined]


def scalar_repr(value, dtype: np.dtype) -> str:
    """Exact text for a scalar of `dtype`: Python's repr of the value after
    conversion (NaN, ±Inf and -0.0 included)."""
    v = np.asarray(value).astype(dtype)[()]
    if dtype.kind == "b":
        return "true" if v else "false"
    if dtype.kind in "iu":
        return str(int(v))
    return repr(float(v))


class Prims:
    def __init__(self, block: Block, location=None):
        self.block = block
        self.location = location  # callable returning (file, line) for the op being emitted

    def _emit(self, op: Operation) -> SSAValue:
        if not isinstance(op, A.RoutineOp) and any(
                is_extern_only_type(v.type) for v in (*op.operands, *op.results)):
            # complex values: numpy routines only (generated kernels never see them)
            el = next(from_ir(v.type.element_type) for v in (*op.operands, *op.results)
                      if is_extern_only_type(v.type))
            raise ExternOnlyError(f"{op.name} on {el} values (complex: numpy routines only)")
        if self.location is not None:
            loc = self.location()
            if loc is not None:  # the user's line, as an MLIR location (CSE ignores it)
                op.location = FileLineColLoc(StringAttr(loc[0]), IntAttr(loc[1]), IntAttr(0))
        self.block.add_op(op)
        return op.results[0]

    # ---- creation -----------------------------------------------------
    def constant(self, value, dtype: np.dtype, shape: tuple[int, ...] = ()) -> SSAValue:
        dtype = np.dtype(dtype)
        if isinstance(value, SymDim):  # a size's value: the text carries its expression
            text = constant_text(value, scalar_repr(hint(value), dtype),
                                 "f" if dtype_kind(dtype) in "fc" else "i")
        else:
            text = scalar_repr(value, dtype)
        return self._emit(A.ConstantOp(text, tensor_type(shape, dtype)))

    def dense(self, arr: np.ndarray) -> SSAValue:
        arr = np.ascontiguousarray(arr).reshape(arr.shape)  # ascontiguousarray makes 0-d 1-d
        if arr.size and (arr == arr.flat[0]).all() and (
            dtype_kind(arr.dtype) not in "fc" or np.signbit(arr).all() == np.signbit(arr.flat[0])
            and not np.isnan(arr.flat[0])
        ):
            c = self.constant(arr.flat[0], arr.dtype)
            return self.broadcast(c, arr.shape) if arr.shape else c
        data = "bytes:" + arr.astype(arr.dtype.newbyteorder("<")).tobytes().hex()
        return self._emit(A.ConstantOp(data, tensor_type(arr.shape, arr.dtype)))

    def iota(self, shape: tuple[int, ...], dim: int, dtype: np.dtype) -> SSAValue:
        return self._emit(A.IotaOp(dim, tensor_type(shape, dtype)))

    # ---- structure ------------------------------------------------------
    def broadcast(self, v: SSAValue, shape: tuple[int, ...]) -> SSAValue:
        if same_shape(shape_of(v), shape):
            return v
        return self._emit(A.BroadcastOp(v, tensor_type(tuple(shape), dtype_of(v))))

    def cast(self, v: SSAValue, dtype: np.dtype) -> SSAValue:
        dtype = np.dtype(dtype)
        if dtype_of(v) == dtype:
            return v
        return self._emit(A.CastOp(v, tensor_type(shape_of(v), dtype)))

    def reshape(self, v: SSAValue, shape: Sequence[int]) -> SSAValue:
        shape = tuple(s if isinstance(s, SymDim) else int(s) for s in shape)
        if same_shape(shape_of(v), shape):
            return v
        return self._emit(A.ReshapeOp(v, tensor_type(shape, dtype_of(v))))

    def transpose(self, v: SSAValue, perm: Sequence[int]) -> SSAValue:
        perm = tuple(int(p) for p in perm)
        if perm == tuple(range(len(perm))):
            return v
        s = shape_of(v)
        return self._emit(A.TransposeOp(v, perm, tensor_type(tuple(s[p] for p in perm), dtype_of(v))))

    def slice(self, v, start, step, shape) -> SSAValue:
        if same_shape(shape, shape_of(v)) and all(b == 0 for b in start) and all(s == 1 for s in step):
            return v
        return self._emit(A.SliceOp(v, start, step, tensor_type(tuple(shape), dtype_of(v))))

    def insert_slice(self, src, dest, start, step) -> SSAValue:
        if same_shape(shape_of(src), shape_of(dest)) and all(b == 0 for b in start) and all(s == 1 for s in step):
            return src
        return self._emit(A.InsertSliceOp(src, dest, start, step))

    def pad(self, v, pad_value: SSAValue, low, high) -> SSAValue:
        shape = tuple(n + a + b for n, a, b in zip(shape_of(v), low, high))
        return self._emit(A.PadOp(v, pad_value, low, high, tensor_type(shape, dtype_of(v))))

    def concat(self, vs: Sequence[SSAValue], axis: int) -> SSAValue:
        if len(vs) == 1:
            return vs[0]
        shape = list(shape_of(vs[0]))
        shape[axis] = sum(shape_of(v)[axis] for v in vs)
        return self._emit(A.ConcatOp(list(vs), axis, tensor_type(tuple(shape), dtype_of(vs[0]))))

    def gather(self, v, indices, axis: int) -> SSAValue:
        s = shape_of(v)
        shape = (*s[:axis], *shape_of(indices), *s[axis + 1:])
        return self._emit(A.GatherOp(v, indices, axis, tensor_type(shape, dtype_of(v))))

    def scatter(self, dest, indices, updates, axis: int, mode: str) -> SSAValue:
        return self._emit(A.ScatterOp(dest, indices, updates, axis, mode))

    # ---- compute --------------------------------------------------------
    def ufunc(self, fn: str, inputs: Sequence[SSAValue], dtype: np.dtype) -> SSAValue:
        return self._emit(A.UfuncOp(fn, list(inputs), tensor_type(shape_of(inputs[0]), np.dtype(dtype))))

    def compare(self, pred: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._emit(A.CompareOp(pred, a, b))

    def select(self, c: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._emit(A.SelectOp(c, a, b))

    def reduce(self, v: SSAValue, kind: str, axes: Sequence[int]) -> SSAValue:
        axes = tuple(sorted(int(a) for a in axes))
        if not axes:
            return v
        s = shape_of(v)
        shape = tuple(n for d, n in enumerate(s) if d not in axes)
        return self._emit(A.ReduceOp(v, kind, axes, tensor_type(shape, dtype_of(v))))

    def argreduce(self, v: SSAValue, kind: str, axis: int) -> SSAValue:
        s = shape_of(v)
        shape = tuple(n for d, n in enumerate(s) if d != axis)
        return self._emit(A.ArgReduceOp(v, kind, axis, tensor_type(shape, np.dtype(np.int64))))

    def scan(self, v: SSAValue, kind: str, axis: int) -> SSAValue:
        return self._emit(A.ScanOp(v, kind, axis))

    def dot(self, a: SSAValue, b: SSAValue) -> SSAValue:
        sa, sb = shape_of(a), shape_of(b)
        shape = (*sa[:-1], sb[-1])
        return self._emit(A.DotOp(a, b, tensor_type(shape, dtype_of(a))))

    def routine(self, fn: str, inputs: Sequence[SSAValue], config: dict,
                results: Sequence[tuple[tuple[int, ...], np.dtype]]) -> list[SSAValue]:
        """numpy's routine `fn` (e.g. "np.linalg.svd") with static keyword
        arguments `config`; `results` are (shape, dtype) per result."""
        op = A.RoutineOp(fn, list(inputs), config,
                         [tensor_type(tuple(s), np.dtype(d)) for s, d in results])
        self._emit(op)
        return list(op.results)
