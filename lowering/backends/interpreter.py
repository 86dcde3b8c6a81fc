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

The rules are tables keyed by op: `SCALAR` (upstream arith/math and the loop
ops computing one value), `CMPF`/`CMPI` predicates, `REDUCE` kinds."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects import affine, arith, func, math, memref
from xdsl.dialects.builtin import IndexType, MemRefType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineSymExpr,
)

from dialects import kernel as K
from dialects import loop as L
from dialects.dtypes import from_ir

from . import numpy_backend


def dtype_of(t) -> np.dtype:
    return np.dtype(np.int64) if isinstance(t, IndexType) else from_ir(t)


def poison(shape: Sequence[int], dt: np.dtype) -> np.ndarray:
    if dt.kind == "f":
        return np.full(shape, np.nan, dt)
    if dt.kind in "iu":
        return np.full(shape, np.iinfo(dt).max, dt)
    return np.zeros(shape, dt)


# ---- scalar rules: numpy arrays in, one array out ------------------------------------------
def _trunc_div(a, b):
    with np.errstate(all="ignore"):
        q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
    return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype)


def _shift(fn):
    def run(a, b):
        bits = a.dtype.itemsize * 8
        return np.where(b < bits, fn(a, np.minimum(b, bits - 1).astype(a.dtype)), 0).astype(a.dtype)
    return run


SCALAR: dict[type, Callable] = {
    arith.AddfOp: np.add, arith.SubfOp: np.subtract, arith.MulfOp: np.multiply,
    arith.DivfOp: np.divide, arith.NegfOp: np.negative, arith.MaximumfOp: np.maximum,
    arith.MinimumfOp: np.minimum,
    arith.AddiOp: np.add, arith.SubiOp: np.subtract, arith.MuliOp: np.multiply,
    arith.DivSIOp: _trunc_div, arith.RemSIOp: np.fmod,
    arith.AndIOp: np.bitwise_and, arith.OrIOp: np.bitwise_or, arith.XOrIOp: np.bitwise_xor,
    arith.ShLIOp: _shift(np.left_shift), arith.ShRSIOp: np.right_shift,
    arith.SelectOp: np.where,
    math.ExpOp: np.exp, math.LogOp: np.log, math.TanhOp: np.tanh, math.SqrtOp: np.sqrt,
    math.AbsFOp: np.abs, math.FloorOp: np.floor, math.CeilOp: np.ceil, math.TruncOp: np.trunc,
    math.RoundEvenOp: np.rint, math.CopySignOp: np.copysign, math.SinOp: np.sin,
    math.CosOp: np.cos, math.TanOp: np.tan, math.Exp2Op: np.exp2, math.ExpM1Op: np.expm1,
    math.Log2Op: np.log2, math.Log10Op: np.log10, math.Log1pOp: np.log1p,
    math.PowFOp: np.power, math.AtanOp: np.arctan, math.Atan2Op: np.arctan2,
    math.CbrtOp: np.cbrt, math.AsinOp: np.arcsin, math.AcosOp: np.arccos,
    math.SinhOp: np.sinh, math.CoshOp: np.cosh, math.AsinhOp: np.arcsinh,
    math.AcoshOp: np.arccosh, math.AtanhOp: np.arctanh,
    math.FmaOp: lambda a, b, c: a * b + c,
}

# ordered predicates are false on NaN, unordered ones true
CMPF: dict[str, Callable] = {
    "oeq": np.equal, "one": lambda a, b: (a < b) | (a > b), "olt": np.less, "ole": np.less_equal,
    "ogt": np.greater, "oge": np.greater_equal, "ord": lambda a, b: ~(np.isnan(a) | np.isnan(b)),
    "ueq": lambda a, b: ~((a < b) | (a > b)), "une": np.not_equal,
    "ult": lambda a, b: ~(a >= b), "ule": lambda a, b: ~(a > b),
    "ugt": lambda a, b: ~(a <= b), "uge": lambda a, b: ~(a < b),
    "uno": lambda a, b: np.isnan(a) | np.isnan(b),
    "false": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool),
    "true": lambda a, b: np.ones(np.broadcast(a, b).shape, bool),
}
_CMPF_NAMES = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge",
               "ult", "ule", "une", "uno", "true")
CMPI: dict[str, Callable] = {
    "eq": np.equal, "ne": np.not_equal, "slt": np.less, "sle": np.less_equal,
    "sgt": np.greater, "sge": np.greater_equal,
}
_CMPI_NAMES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")


def _unsigned(a: np.ndarray) -> np.ndarray:
    return a.view(np.dtype(f"u{a.dtype.itemsize}")) if a.dtype.kind == "i" else a


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


def affine_value(e: AffineExpr, dims: list, symbols: Sequence = ()):
    if isinstance(e, AffineDimExpr):
        return dims[e.position]
    if isinstance(e, AffineSymExpr):
        return symbols[e.position]
    if isinstance(e, AffineConstantExpr):
        return e.value
    assert isinstance(e, AffineBinaryOpExpr)
    a, b = affine_value(e.lhs, dims, symbols), affine_value(e.rhs, dims, symbols)
    k = e.kind
    if k == AffineBinaryOpKind.Add:
        return a + b
    if k == AffineBinaryOpKind.Mul:
        return a * b
    if k == AffineBinaryOpKind.Mod:
        return np.mod(a, b)
    if k == AffineBinaryOpKind.FloorDiv:
        return np.floor_divide(a, b)
    if k == AffineBinaryOpKind.CeilDiv:
        return -np.floor_divide(-a, b)
    raise NotImplementedError(f"affine expression {e}")


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
        n = op.num_inputs.value.data
        ins = [self.bufs[b] for b in op.buffers[:n]]
        outs = [self.bufs[b] for b in op.buffers[n:]]
        fn = op.fn.data
        if fn.startswith("matmul"):
            flags = fn[7:] or "nn"
            a, b = (x.swapaxes(-1, -2) if t == "t" else x for x, t in zip(ins, flags))
            res = (np.matmul(a, b),)
        else:
            inner = op.computed()
            r = numpy_backend.RULES[type(inner)](inner)(*ins)
            res = r if len(outs) > 1 else (r,)
        for buf, r in zip(outs, res):
            buf[...] = r

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
            ranges = [n if isinstance(n, int) else int(np.asarray(env[n]).reshape(-1)[0])
                      for n in op.extents()]
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

    def indices(self, op, env: dict, depth: int) -> list:
        vals = [self.get(env, i, depth) for i in op.indices]
        m = op.map.data
        dims, syms = vals[:m.num_dims], vals[m.num_dims:]
        return [np.asarray(affine_value(e, dims, syms), np.int64)
                if not isinstance(e, AffineConstantExpr)
                else np.full((1,) * depth, e.value, np.int64) for e in op.map.data.results]

    def reduce(self, op: L.ReduceOp, env: dict, depth: int, sequential: bool) -> np.ndarray:
        ranges = list(L.ints(op.ranges))
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
        rt = op.results[0].type
        dt = dtype_of(rt)
        with np.errstate(all="ignore"):
            if isinstance(op, (L.ConstOp, K.ParamOp)):
                text = op.value.data if isinstance(op, L.ConstOp) else self.params[op.index.value.data]
                c = numpy_backend.parse_constant(text, dt)
                return np.asarray(c, dt).reshape((1,) * depth)
            if isinstance(op, L.UfuncOp):
                return np.asarray(getattr(np, op.fn.data)(*args)).astype(dt)
            if isinstance(op, L.CastOp):
                return args[0].astype(dt)
            if isinstance(op, arith.CmpfOp):
                return CMPF[_CMPF_NAMES[op.predicate.value.data]](*args)
            if isinstance(op, arith.CmpiOp):
                name = _CMPI_NAMES[op.predicate.value.data]
                if name.startswith("u"):
                    return CMPI["s" + name[1:]](_unsigned(args[0]), _unsigned(args[1]))
                return CMPI[name](*args)
            if isinstance(op, affine.ApplyOp):
                m = op.map.data
                return np.asarray(affine_value(m.results[0], args[:m.num_dims], args[m.num_dims:]),
                                  np.int64)
            if isinstance(op, (arith.IndexCastOp, arith.ExtFOp, arith.TruncFOp, arith.SIToFPOp,
                               arith.FPToSIOp, arith.ExtSIOp, arith.TruncIOp)):
                return args[0].astype(dt)
            if isinstance(op, arith.ExtUIOp):
                return _unsigned(args[0]).astype(dt)
            if isinstance(op, (arith.DivUIOp, arith.RemUIOp, arith.ShRUIOp)):
                a, b = _unsigned(args[0]), _unsigned(args[1])
                fn = {arith.DivUIOp: np.floor_divide, arith.RemUIOp: np.remainder,
                      arith.ShRUIOp: np.right_shift}[type(op)]
                return fn(a, np.where(b == 0, 1, b) if fn is not np.right_shift else b).astype(dt)
            rule = SCALAR.get(type(op))
            if rule is None:
                raise NotImplementedError(f"interpreter: no rule for {op.name}")
            return np.asarray(rule(*args)).astype(dt)


def run_module(module: ModuleOp, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The results of a loop- or kernel-level module's (first) function."""
    f = next(o for o in module.ops if isinstance(o, func.FuncOp))
    return Interpreter(f).run([np.asarray(x) for x in inputs])
