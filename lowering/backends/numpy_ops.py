"""The ops handler for numpy (`NumpyOps`, an implementation of
`lowering/codegen/ops.py`'s protocol): the scalar ops of a kernel body on
numpy arrays, for the loop-level interpreter (`interpreter.py`).

A value is an array with one axis per vectorized dim open where it is
defined (size 1 where it does not vary); the handler knows that depth, so a
constant has its axes too. Each rule is numpy's own meaning of the op: a
`loop.ufunc` is the numpy ufunc of its name, and an upstream op is the numpy
function of what the op computes (written here, not read from the op
table's rewrites, so that a wrong rewrite shows as a wrong answer)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects.builtin import IndexType
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineSymExpr,
)

from dialects import ufuncs as U
from dialects.dtypes import from_ir

from ..codegen.ops import ScalarOps, UfuncRule, UpstreamRule
from .numpy_backend import parse_constant


def dtype_of(t) -> np.dtype:
    return np.dtype(np.int64) if isinstance(t, IndexType) else from_ir(t)


def unsigned(a: np.ndarray) -> np.ndarray:
    """A signed integer array's bits as unsigned (for the unsigned predicates)."""
    return a.view(np.dtype(f"u{a.dtype.itemsize}")) if a.dtype.kind == "i" else a


def affine_value(e: AffineExpr, dims: list, symbols: Sequence = ()):
    if isinstance(e, AffineDimExpr):
        return dims[e.position]
    if isinstance(e, AffineSymExpr):  # a kernel parameter
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


def _typed(fn: Callable) -> UpstreamRule:
    """The rule of numpy function fn, its result in the op's type."""
    return lambda h, args, rt: np.asarray(fn(*args)).astype(dtype_of(rt))


def _ufunc(fn: np.ufunc) -> UfuncRule:
    return lambda h, args, types, rt: np.asarray(fn(*args)).astype(dtype_of(rt))


# numpy's ufunc of every name the loop level generates: numpy is the meaning
UFUNC_RULES: dict[str, UfuncRule] = {
    name: _ufunc(getattr(np, name)) for name in U.names(lambda u: u.generated)}

UPSTREAM_RULES: dict[str, UpstreamRule] = {op: _typed(fn) for op, fn in {
    "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
    "arith.divf": np.divide, "arith.negf": np.negative,
    "arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply,
    "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or, "arith.xori": np.bitwise_xor,
    "arith.maxsi": np.maximum, "arith.minsi": np.minimum,
    "math.exp": np.exp, "math.log": np.log, "math.tanh": np.tanh, "math.sqrt": np.sqrt,
    "math.absf": np.abs, "math.floor": np.floor, "math.ceil": np.ceil, "math.trunc": np.trunc,
    "math.roundeven": np.rint, "math.copysign": np.copysign, "math.sin": np.sin,
    "math.cos": np.cos, "math.tan": np.tan, "math.exp2": np.exp2, "math.expm1": np.expm1,
    "math.log2": np.log2, "math.log10": np.log10, "math.log1p": np.log1p,
    "math.powf": np.power, "math.atan": np.arctan, "math.atan2": np.arctan2,
    "math.cbrt": np.cbrt, "math.asin": np.arcsin, "math.acos": np.arccos,
    "math.sinh": np.sinh, "math.cosh": np.cosh, "math.asinh": np.arcsinh,
    "math.acosh": np.arccosh, "math.atanh": np.arctanh,
    "math.fma": lambda a, b, c: a * b + c,
}.items()}

# arith.cmpf: ordered predicates are false on NaN, unordered ones true
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
# arith.cmpi's signed predicates; an unsigned one compares the bits as unsigned
CMPI: dict[str, Callable] = {
    "eq": np.equal, "ne": np.not_equal, "slt": np.less, "sle": np.less_equal,
    "sgt": np.greater, "sge": np.greater_equal,
}


class NumpyOps(ScalarOps[np.ndarray]):
    """The scalar ops of a kernel body at `depth` vectorized axes. Called
    inside `np.errstate(all="ignore")`: a kernel computes through NaN and
    infinity as the compiled one does."""

    backend = "interpreter"
    UFUNCS = UFUNC_RULES
    UPSTREAM = UPSTREAM_RULES

    def __init__(self, depth: int):
        self.depth = depth

    def constant(self, text, rt):
        dt = dtype_of(rt)
        return np.asarray(parse_constant(text, dt), dt).reshape((1,) * self.depth)

    def cast(self, x, src, dst):
        return x.astype(dtype_of(dst))

    def cmpf(self, predicate, a, b):
        return CMPF[predicate](a, b)

    def cmpi(self, predicate, a, b):
        if predicate.startswith("u"):
            return CMPI["s" + predicate[1:]](unsigned(a), unsigned(b))
        return CMPI[predicate](a, b)

    def select(self, cond, a, b):
        return np.asarray(np.where(cond, a, b))

    def index_cast(self, op, args):
        return args[0].astype(dtype_of(op.result.type))

    def affine_apply(self, op, args):
        m = op.map.data
        return np.asarray(affine_value(m.results[0], args[:m.num_dims], args[m.num_dims:]),
                          np.int64)
