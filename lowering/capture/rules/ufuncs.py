"""Ufunc calls: numpy resolves the loop (`ufunc.resolve_dtypes`, NEP 50 weak
Python scalars) and the broadcast shape; capture casts the operands to the
loop's input dtypes, broadcasts them explicitly and emits `array.ufunc`, which
the `decompose` pass later turns into `arith`/`math` where those match."""

from __future__ import annotations

import numpy as np

from ..registry import ufunc_method
from ..traced import TracedArray
from ..tracer import Unsupported
from .common import check_out, store_out

# ufuncs with one output whose numpy meaning the IR covers (by `ufunc.__name__`)
SUPPORTED_UFUNCS = frozenset("""
add subtract multiply divide floor_divide remainder fmod power float_power negative
positive absolute fabs sign reciprocal square sqrt cbrt exp exp2 expm1 log log2 log10
log1p logaddexp logaddexp2 sin cos tan arcsin arccos arctan arctan2 sinh cosh tanh arcsinh
arccosh arctanh hypot maximum minimum fmax fmin floor ceil trunc rint copysign greater
greater_equal less less_equal equal not_equal logical_and logical_or logical_not
logical_xor isnan isinf isfinite signbit bitwise_and bitwise_or bitwise_xor invert
left_shift right_shift conjugate deg2rad rad2deg degrees radians heaviside nextafter
""".split())


def _operand_kind(x):
    if isinstance(x, TracedArray):
        return x._dtype_operand()
    if isinstance(x, (bool, int, float)):
        return type(x)
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype
    if isinstance(x, complex):
        raise Unsupported("complex operands")
    return np.asarray(x).dtype


def resolve(ufunc: np.ufunc, inputs, dtype=None, casting="same_kind", signature=None):
    kinds = tuple(_operand_kind(x) for x in inputs)
    sig = signature
    if dtype is not None:
        sig = (None,) * ufunc.nin + (np.dtype(dtype),) * ufunc.nout
    kw = {} if sig is None else {"signature": sig}
    # numpy's own errors (no loop, casting) propagate unchanged
    return ufunc.resolve_dtypes(kinds + (None,) * ufunc.nout, casting=casting, **kw)


def operand_value(tr, x, dtype: np.dtype):
    """The SSA value of operand x converted to the loop dtype. Python scalars are
    converted by numpy itself (so out-of-range ints raise as in numpy)."""
    p = tr.prims
    if isinstance(x, TracedArray):
        return p.cast(x._v(), dtype)
    if isinstance(x, (bool, int, float)):
        return p.constant(np.asarray(x, dtype=dtype)[()], dtype)
    return p.cast(tr.lift(x)._v(), dtype)


def apply(tr, ufunc: np.ufunc, inputs, dtype=None, casting="same_kind", signature=None):
    """Emit ufunc(*inputs) without out=; returns a TracedArray."""
    name = ufunc.__name__
    if name not in SUPPORTED_UFUNCS or ufunc.nout != 1:
        raise Unsupported(f"ufunc {name} is not captured")
    loop = resolve(ufunc, inputs, dtype, casting, signature)
    in_dt, out_dt = loop[: ufunc.nin], loop[-1]
    for d in loop:
        if d.kind in "cOSUVMm":
            raise Unsupported(f"{d} operands")
    shapes = [np.shape(x) if not isinstance(x, TracedArray) else x.shape for x in inputs]
    shape = np.broadcast_shapes(*shapes)
    p = tr.prims
    vals = [p.broadcast(operand_value(tr, x, d), shape) for x, d in zip(inputs, in_dt)]
    if name == "positive" or (name == "conjugate" and out_dt.kind != "c"):
        v = vals[0]
    else:
        v = p.ufunc(name, vals, out_dt)
    scalar = shape == ()
    # Python-float arithmetic stays Python: a result computed only from Python
    # scalars (traced float arguments, literals) is handed back as float/bool
    weak = None
    if scalar and any(isinstance(x, TracedArray) and x._weak is float for x in inputs) and all(
            (isinstance(x, TracedArray) and x._weak is not None) or type(x) in (bool, int, float)
            for x in inputs):
        weak = {"f": float, "b": bool}.get(out_dt.kind)
    return tr.wrap(v, scalar=scalar, weak=weak)


@ufunc_method("__call__")
def call(tr, ufunc, *inputs, out=None, dtype=None, casting="same_kind", where=True,
         signature=None, order="K", subok=True):
    if where is not True:
        raise Unsupported("where= in a ufunc call")
    if ufunc is np.matmul:
        from .linalg import matmul

        return matmul(tr, *inputs, out=out, dtype=dtype, casting=casting)
    if ufunc.__name__ == "divmod" or ufunc is np.divmod:
        return (apply(tr, np.floor_divide, inputs), apply(tr, np.remainder, inputs))
    if ufunc.nout != 1:
        raise Unsupported(f"ufunc {ufunc.__name__} has {ufunc.nout} outputs")
    out = check_out(out)
    if out is not None:  # numpy's own casting error for the output, before any op
        kinds = tuple(_operand_kind(x) for x in inputs)
        ufunc.resolve_dtypes(kinds + (out.dtype,), casting=casting)
    res = apply(tr, ufunc, inputs, dtype, casting, signature)
    if out is None:
        return res
    return store_out(tr, out, res, casting, ufunc.__name__)


@ufunc_method("outer")
def outer(tr, ufunc, a, b, **kwargs):
    a, b = tr.lift(a), tr.lift(b)
    ra = np.reshape(a, a.shape + (1,) * b.ndim)
    return call(tr, ufunc, ra, b, **kwargs)
