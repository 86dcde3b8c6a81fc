"""The loop-level interpreter: runs loop-level (after `lower-to-loop`) and
kernel-level (after `schedule`) IR directly with numpy, so that every pass
below the tensor level is checked against numpy without the LLVM emitter in
between (the tensor passes are checked against the numpy reference backend
the same way).

A kernel runs vectorized: each parallel dim, each `loop.map` dim and each
`loop.reduce` dim is one numpy axis, a value defined at nesting depth d is an
array of d axes (size 1 where it does not vary), an index argument is an
`arange` along its axis, a load or store is fancy indexing at the index
arrays its affine map gives, and a reduction is numpy's reduction over its
axes. That is the kernel's meaning whenever its points are independent —
every kernel but those marked `accumulate` (a scan, a scatter, a column
reduction: points that must run in order), which run point by point.
Buffers from `memref.alloc` start as poison (NaN, or the type's extreme
integer), so a kernel that reads what nothing wrote shows it.

The scalar ops of a body (upstream arith/math, `loop.ufunc`, `loop.const`,
`loop.cast`, compares, selects, indices as data) go through the ops-handler
protocol (`lowering/codegen/ops.py`) to its numpy implementation
(`numpy_ops.NumpyOps`), as the LLVM emitter's go to `LLVMOps`; the
reductions are the table `REDUCE`, keyed by kind."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr

from dialects import kernel as K
from dialects import loop as L
from dialects.dtypes import kind as dtype_kind

from ..codegen.ops import emit
from . import numpy_backend
from .numpy_ops import NumpyOps, affine_value, dtype_of


def poison(shape: Sequence[int], dt: np.dtype) -> np.ndarray:
    if dtype_kind(dt) == "f":
        return np.full(shape, np.nan, dt)
    if dt.kind in "iu":
        return np.full(shape, np.iinfo(dt).max, dt)
    return np.zeros(shape, dt)


# ---- reductions: the reduced array's axes in, numpy's reduction out ----------------------
def _reduce_sum(x, axes):
    return np.any(x, axis=axes) if x.dtype == bool else np.sum(x, axis=axes, dtype=x.dtype)


def _reduce_prod(x, axes):
    return np.all(x, axis=axes) if x.dtype == bool else np.prod(x, axis=axes, dtype=x.dtype)


def _arg(fn):
    def run(x, axes):
        lead = x.shape[: x.ndim - len(axes)]
        flat = x.reshape(*lead, -1)
        return fn(flat, axis=-1).astype(np.int64)
    return run


REDUCE: dict[str, Callable] = {
    "sum": _reduce_sum, "prod": _reduce_prod,
    "max": lambda x, axes: np.max(x, axis=axes), "min": lambda x, axes: np.min(x, axis=axes),
    "any": lambda x, axes: np.any(x, axis=axes), "all": lambda x, axes: np.all(x, axis=axes),
    "argmax": _arg(np.argmax), "argmin": _arg(np.argmin),
}


class Interpreter:
    """Runs one loop- or kernel-level function; `buffers` maps memrefs to
    arrays. Values are arrays whose ndim is the number of vectorized axes
    open where they are defined."""

    def __init__(self, f: func.FuncOp):
        self.f = f
        self.errors: list[IndexError] = []

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        block = self.f.body.blocks[0]
        self.bufs: dict[SSAValue, np.ndarray] = dict(zip(block.args, inputs))
        for op in block.ops:
            if isinstance(op, memref.AllocOp):
                t = op.memref.type
                assert isinstance(t, MemRefType)
                self.bufs[op.memref] = poison(t.get_shape(), dtype_of(t.element_type))
            elif isinstance(op, memref.CastOp):  # the same buffer, its type's sizes dynamic
                self.bufs[op.dest] = self.bufs[op.source]
            elif isinstance(op, (L.KernelOp, K.KernelOp)):
                self.kernel(op)
            elif isinstance(op, L.ExternOp):
                self.extern(op)
            elif isinstance(op, func.ReturnOp):
                return [self.bufs[v] for v in op.arguments]
            else:
                raise NotImplementedError(f"interpreter: {op.name} at function level")
        raise AssertionError("no func.return")

    # ---- function-level ops ---------------------------------------------------------------
    def extern(self, op: L.ExternOp) -> None:
        run_extern(op, self.bufs)

    def kernel(self, k) -> None:
        self.params = k.param_values() if isinstance(k, K.KernelOp) else []
        block = k.body.blocks[0]
        par = list(L.ints(k.parallel))
        if par and par[0] == L.DYN:  # the launch's: its work over the other dims
            par[0] = k.work.value.data // max(int(np.prod(par[1:], dtype=np.int64)), 1)
        if "accumulate" in k.attributes:
            for point in itertools.product(*(range(n) for n in par)):
                env = {a: np.array(i, np.int64) for a, i in zip(block.args, point)}
                self.region(block, env, 0, sequential=True)
        else:
            env = {a: self.axis(i, len(par), n) for i, (a, n) in enumerate(zip(block.args, par))}
            self.region(block, env, len(par), sequential=False)
        if self.errors:
            raise self.errors[0]

    @staticmethod
    def axis(i: int, depth: int, n: int) -> np.ndarray:
        shape = [1] * depth
        shape[i] = n
        return np.arange(n, dtype=np.int64).reshape(shape)

    # ---- regions ---------------------------------------------------------------------------
    def region(self, block: Block, env: dict, depth: int, sequential: bool):
        """Runs the ops of block; returns the yielded values."""
        for op in block.ops:
            if isinstance(op, L.YieldOp):
                return [self.get(env, v, depth) for v in op.values]
            self.op(op, env, depth, sequential)
        return []

    def get(self, env: dict, v: SSAValue, depth: int) -> np.ndarray:
        x = env[v]
        if x.ndim < depth:
            x = x.reshape(x.shape + (1,) * (depth - x.ndim))
        return x

    def op(self, op: Operation, env: dict, depth: int, sequential: bool) -> None:
        if isinstance(op, L.MapOp):
            ranges = self.extents(op, env)
            b = op.body.blocks[0]
            if sequential:
                for point in itertools.product(*(range(n) for n in ranges)):
                    inner = dict(env)
                    inner.update({a: np.array(i, np.int64).reshape((1,) * depth)
                                  for a, i in zip(b.args, point)})
                    self.region(b, inner, depth, True)
                return
            inner = dict(env)
            total = depth + len(ranges)
            inner.update({a: self.axis(depth + i, total, n)
                          for i, (a, n) in enumerate(zip(b.args, ranges))})
            self.region(b, inner, total, False)
            return
        if isinstance(op, L.ReduceOp):
            env[op.result] = self.reduce(op, env, depth, sequential)
            return
        if isinstance(op, L.LoadOp):
            buf = self.bufs[op.buffer]
            idx = self.indices(op, env, depth)
            env[op.result] = np.asarray(buf[tuple(idx)]) if idx else \
                np.asarray(buf[()]).reshape((1,) * depth)
            return
        if isinstance(op, L.StoreOp):
            buf = self.bufs[op.buffer]
            idx = self.indices(op, env, depth)
            val = self.get(env, op.value, depth)
            if not idx:
                buf[()] = val.reshape(()) if val.size == 1 else val
                return
            shape = np.broadcast_shapes(val.shape, *(np.shape(i) for i in idx))
            buf[tuple(np.broadcast_to(i, shape) for i in idx)] = np.broadcast_to(val, shape)
            return
        if isinstance(op, L.FlagsOp):  # (values only: the flags are the backends')
            return
        if isinstance(op, L.IndexOp):
            x = self.get(env, op.value, depth).astype(np.int64)
            n = op.size.value.data
            j = np.where(x < 0, x + n, x)
            bad = (j < 0) | (j >= n)
            if np.any(bad) and not self.errors:
                self.errors.append(IndexError(
                    f"index {x[bad].flat[0]} is out of bounds for axis {op.axis.value.data} "
                    f"with size {n}"))
            env[op.result] = np.where(bad, 0, j)
            return
        env[op.results[0]] = self.scalar(op, [self.get(env, o, depth) for o in op.operands],
                                         depth)

    @staticmethod
    def extents(op: L.MapOp | L.ReduceOp, env: dict) -> list[int]:
        """The op's extents, those known at the launch (kernel parameters)
        read from their values."""
        return [n if isinstance(n, int) else int(np.asarray(env[n]).reshape(-1)[0])
                for n in op.extents()]

    def indices(self, op, env: dict, depth: int) -> list:
        vals = [self.get(env, i, depth) for i in op.indices]
        m = op.map.data
        dims, syms = vals[:m.num_dims], vals[m.num_dims:]
        return [np.asarray(affine_value(e, dims, syms), np.int64)
                if not isinstance(e, AffineConstantExpr)
                else np.full((1,) * depth, e.value, np.int64) for e in op.map.data.results]

    def reduce(self, op: L.ReduceOp, env: dict, depth: int, sequential: bool) -> np.ndarray:
        ranges = self.extents(op, env)
        b = op.body.blocks[0]
        total = depth + len(ranges)
        inner = dict(env)
        inner.update({a: self.axis(depth + i, total, n) for i, (a, n) in enumerate(zip(b.args, ranges))})
        if sequential and any(isinstance(o, L.StoreOp) for o in b.walk()):
            raise NotImplementedError("interpreter: a store inside an ordered kernel's reduction")
        (y,) = self.region(b, inner, total, False)
        y = np.broadcast_to(y, np.broadcast_shapes(y.shape, tuple([1] * depth + ranges)))
        with np.errstate(all="ignore"):
            r = REDUCE[op.kind.data](y, tuple(range(depth, total))) if ranges else y
        return np.asarray(r).astype(dtype_of(op.result.type))

    # ---- one value -------------------------------------------------------------------------
    def scalar(self, op: Operation, args: list, depth: int) -> np.ndarray:
        """A scalar op, by the numpy ops handler (`numpy_ops.NumpyOps`)."""
        with np.errstate(all="ignore"):
            if isinstance(op, K.ParamOp):  # the kernel's value for this launch
                dt = dtype_of(op.result.type)
                c = numpy_backend.parse_constant(self.params[op.index.value.data], dt)
                return np.asarray(c, dt).reshape((1,) * depth)
            return emit(NumpyOps(depth), op, args)


def run_extern(op: L.ExternOp, bufs: dict) -> None:
    """A function-level `loop.extern` with numpy, on `bufs` (memref -> array):
    a matmul with numpy's matmul, any other routine by its numpy rule."""
    n = op.num_inputs.value.data
    ins = [bufs[b] for b in op.buffers[:n]]
    outs = [bufs[b] for b in op.buffers[n:]]
    fn = op.fn.data
    if fn.startswith("matmul"):
        flags = fn[7:] or "nn"
        if op.body is not None:  # the product of views of the inputs
            ins = numpy_backend.extern_operands(op)(*ins)
        a, b = (x.swapaxes(-1, -2) if t == "t" else x for x, t in zip(ins, flags))
        res = (np.matmul(a, b),)
    else:
        r = numpy_backend.extern_routine(op)(*ins)
        res = r if len(outs) > 1 else (r,)
    for buf, r in zip(outs, res):
        buf[...] = r


def run_module(module: ModuleOp, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The results of a loop- or kernel-level module's (first) function."""
    f = next(o for o in module.ops if isinstance(o, func.FuncOp))
    return Interpreter(f).run([np.asarray(x) for x in inputs])
