"""Ufunc calls: numpy resolves the loop (`ufunc.resolve_dtypes`, NEP 50 weak
Python scalars) and the broadcast shape; capture casts the operands to the
loop's input dtypes, broadcasts them explicitly and emits `array.ufunc`, which
the `decompose` pass later turns into `arith`/`math` where those match."""

from __future__ import annotations

import math
import warnings

import numpy as np

from dialects.dtypes import BFLOAT16, extern_only, representable
from dialects.symbols import SymDim, broadcast_shapes

from dialects import ufuncs as U

from ..registry import ufunc_method
from ..traced import TracedArray
from ..views import TransposeStep
from ..tracer import Unsupported
from .common import check_out, store_out

# ufuncs with one output whose numpy meaning the IR covers (by `ufunc.__name__`):
# the rows of the op table (dialects/ufuncs.py)
SUPPORTED_UFUNCS = frozenset(U.UFUNCS)


def _operand_kind(x):
    """What `ufunc.resolve_dtypes` takes for x: a dtype, or the Python type int or
    float for NEP 50 weak scalars (a Python bool is not weak: it is np.bool_)."""
    if isinstance(x, TracedArray):
        k = x._dtype_operand()
        return np.dtype(np.bool_) if k is bool else k
    if isinstance(x, SymDim):  # a size: a Python int
        return int
    # numpy scalars first: np.float64 subclasses float but is strong under NEP 50
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype
    if isinstance(x, bool):
        return np.dtype(np.bool_)
    if isinstance(x, (int, float)):
        return type(x)
    if isinstance(x, complex):
        return complex
    return np.asarray(x).dtype


def _stand_in(x):
    """A zero-size array of x's dtype, or x itself if it is a Python scalar (its
    value matters: numpy rejects out-of-range Python ints)."""
    if isinstance(x, TracedArray):
        return x._weak(0) if x._weak is not None else np.empty(0, x.dtype)
    if isinstance(x, (np.ndarray, np.generic)):
        return np.empty(0, x.dtype)
    if isinstance(x, SymDim):  # a size: its value (a plain int of it, unrecorded)
        return int.__int__(x)
    if isinstance(x, (bool, int, float, complex)):
        return x
    return np.empty(0, np.asarray(x).dtype)


def numpy_check(ufunc: np.ufunc, inputs, out=None, **kwargs) -> None:
    """Let numpy raise its own exception (exact type and message) for a call it
    rejects whatever the values: no loop for the dtypes, `dtype=`/`casting=`
    conflicts, an output it cannot cast to, a Python int out of range. It runs
    the ufunc on zero-size stand-ins, so it costs microseconds and never raises
    for value-dependent reasons (those are the backend's job)."""
    kw = {k: v for k, v in kwargs.items() if v is not None}
    if out is not None:
        kw["out"] = np.empty(0, out.dtype)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ufunc(*[_stand_in(x) for x in inputs], **kw)


def resolve(ufunc: np.ufunc, inputs, dtype=None, casting="same_kind", signature=None):
    """The loop numpy picks, as dtypes (inputs..., output); numpy's own errors
    (no loop, casting, out-of-range Python int) propagate unchanged."""
    numpy_check(ufunc, inputs, dtype=dtype, casting=casting, signature=signature)
    kinds = tuple(_operand_kind(x) for x in inputs)
    sig = signature
    if dtype is not None:
        sig = (None,) * ufunc.nin + (np.dtype(dtype),) * ufunc.nout
    kw = {} if sig is None else {"signature": sig}
    return ufunc.resolve_dtypes(kinds + (None,) * ufunc.nout, casting=casting, **kw)


def _fits(x: int, dtype: np.dtype) -> bool:
    try:
        np.asarray(x, dtype=dtype)
    except OverflowError:
        return False
    return True


def operand_value(tr, x, dtype: np.dtype):
    """The SSA value of operand x converted to the loop dtype. Python scalars are
    converted by numpy itself (so out-of-range ints raise as in numpy)."""
    p = tr.prims
    if isinstance(x, TracedArray):
        return p.cast(x._v(), dtype)
    if isinstance(x, np.generic):
        return p.cast(tr.lift(x)._v(), dtype)
    if isinstance(x, SymDim):  # a size's value (each call's): its constant carries it
        if dtype.kind in "iu" and (dtype.itemsize < 8 or not -(1 << 62) < int.__int__(x) < (1 << 62)):
            # (a narrow integer: numpy's range check on the value, specialized)
            return p.constant(np.asarray(int(x), dtype=dtype)[()], dtype)
        return p.constant(x, dtype)
    if isinstance(x, (bool, int, float)):
        return p.constant(np.asarray(x, dtype=dtype)[()], dtype)
    return p.cast(tr.lift(x)._v(), dtype)


def _complex_call(tr, ufunc: np.ufunc, inputs, loop, dtype, casting, signature):
    """A ufunc whose loop is complex: one `array.routine "np.ufunc"` that numpy
    runs (generated kernels have no complex values), or a graph break. Its
    array operands are the routine's operands; Python scalars (complex ones
    too) stay in the config, so numpy sees them as weak just as the user's
    call does."""
    if dtype is not None or signature is not None or casting != "same_kind":
        raise Unsupported(f"{ufunc.__name__} of complex values with dtype=/signature=/casting=")
    arrays, args = [], []
    for x in inputs:
        if isinstance(x, TracedArray):
            if x._weak is not None:  # a traced Python float: weak only in the user's call
                raise Unsupported(f"{ufunc.__name__} of complex values and a traced Python float")
            arrays.append(x)
            args.append("@")
        elif type(x) in (bool, int, float):
            args.append(("scalar", x))
        elif type(x) is complex:
            args.append(("complex", x.real, x.imag))
        else:  # a numpy array or scalar of the program: an operand like any other
            arrays.append(tr.lift(x))
            args.append("@")
    out_dt = loop[-1]
    if not representable(out_dt):
        raise Unsupported(f"{ufunc.__name__} returns {out_dt}")
    shape = broadcast_shapes(*[a.shape for a in arrays])
    (v,) = tr.prims.routine("np.ufunc", [a._v() for a in arrays],
                            {"ufunc": ufunc.__name__, "args": tuple(args)}, [(shape, out_dt)])
    return tr.wrap(v, scalar=shape == () and all(a._scalar for a in arrays))


def apply(tr, ufunc: np.ufunc, inputs, dtype=None, casting="same_kind", signature=None):
    """Emit ufunc(*inputs) without out=; returns a TracedArray."""
    name = ufunc.__name__
    if ufunc.nout != 1:
        raise Unsupported(f"ufunc {name} is not captured")
    loop = resolve(ufunc, inputs, dtype, casting, signature)
    if any(extern_only(d) for d in loop):
        return _complex_call(tr, ufunc, inputs, loop, dtype, casting, signature)
    if name not in SUPPORTED_UFUNCS:
        raise Unsupported(f"ufunc {name} is not captured")
    in_dt, out_dt = loop[: ufunc.nin], loop[-1]
    for d in loop:
        if d.kind in "cOSUVMm" and d != BFLOAT16:
            raise Unsupported(f"{d} operands")
    shapes = [x.shape if isinstance(x, TracedArray) else () if isinstance(x, SymDim)
              else np.shape(x) for x in inputs]
    shape = broadcast_shapes(*shapes)
    if transposed_operands(inputs, shape):
        # computed in the operands' own order (contiguous reads and writes),
        # the result their transpose: numpy's order-K result, F-ordered too
        return np.transpose(apply(tr, ufunc, flipped(inputs, len(shape)), dtype, casting,
                                  signature))
    p = tr.prims
    big = [x for x, d in zip(inputs, in_dt) if type(x) is int and not _fits(x, d)]
    if big:
        # numpy compares an out-of-range Python int with an integer array without
        # converting it (`int32_array == 2**40` is all False): every value of the
        # loop dtype compares alike, so ask numpy with one element of each.
        with np.errstate(all="ignore"):
            r = ufunc(*[x if type(x) is int else np.zeros(1, d) for x, d in zip(inputs, in_dt)])
        c = p.constant(np.asarray(r).reshape(-1)[0], out_dt)
        return tr.wrap(p.broadcast(c, shape), scalar=shape == ())
    vals = [p.broadcast(operand_value(tr, x, d), shape) for x, d in zip(inputs, in_dt)]
    if name == "positive" or (name == "conjugate" and out_dt.kind != "c"):
        v = vals[0]
    elif name == "power" and _power_fast_path(out_dt, in_dt, shapes[1], shape):
        v = _scalar_power(tr, inputs[1], vals, out_dt, shape)
    else:
        v = p.ufunc(name, vals, out_dt)
    # a ufunc call returns numpy scalars for 0-d results, even of Python floats
    # (`np.absolute(s)` is np.float64); operators on Python scalars stay Python
    # (traced.py `_as_python`)
    return tr.wrap(v, scalar=shape == ())


def _transposed(x) -> bool:
    """x's memory runs in the reverse order of its axes: the caller's
    Fortran-ordered array (or a view of one that is), or a view whose last
    step reverses the axes of an array the graph made (C-ordered)."""
    if not isinstance(x, TracedArray) or x.ndim < 2:
        return False
    strides = x._known_strides()
    if strides is not None:  # (a slice of one too: its strides grow along its axes)
        walk = [abs(s) for s, n in zip(strides, x.shape) if n > 1]
        return len(walk) >= 2 and all(a < b for a, b in zip(walk, walk[1:]))
    steps = x._steps
    return (len(steps) == 1 and isinstance(steps[0], TransposeStep)
            and steps[0].perm == tuple(range(x.ndim - 1, -1, -1)) and x._st.source is None)


def flipped(inputs, n: int) -> list:
    """Each array operand transposed as a ufunc of n dims broadcasts it (its
    shape padded with leading 1s first); scalars as they are."""
    return [np.transpose(np.reshape(x, (1,) * (n - np.ndim(x)) + tuple(np.shape(x))))
            if isinstance(x, (TracedArray, np.ndarray)) and np.ndim(x) else x for x in inputs]


def transposed_operands(inputs, shape) -> bool:
    """Whether a ufunc of these operands is computed in their transposed
    order: a result of 2 dims or more with static sizes, every operand of
    the result's whole shape laid out in reverse (`_transposed`), at least
    one; smaller operands broadcast (a row, a scalar) go along. The values
    are the same either way; only the order memory is walked in (and the
    result's layout) differ."""
    if len(shape) < 2 or any(type(d) is not int for d in shape):
        return False
    full = [x for x in inputs if isinstance(x, (TracedArray, np.ndarray))
            and tuple(np.shape(x)) == tuple(shape) and math.prod(shape) > 1]
    return bool(full) and all(_transposed(x) for x in full)


def _power_fast_path(out_dt: np.dtype, in_dt, exp_shape, shape) -> bool:
    """numpy's float32/float64 `power` loop special-cases an exponent it sees
    with stride 0, i.e. one element broadcast over the whole call (a scalar, a
    0-d array, or a size-1 array of another shape than the result): 0.5 is
    then `sqrt`, so `x ** 0.5` is NaN at -inf and keeps -0.0 where `pow` gives
    +inf and +0.0 (its -1, 0, 1 and 2 cases equal `pow`)."""
    return (out_dt in (np.dtype(np.float32), np.dtype(np.float64)) and in_dt[1] == out_dt
            and math.prod(exp_shape) == 1 and (len(exp_shape) == 0 or tuple(exp_shape) != shape))


def _scalar_power(tr, exponent, vals, out_dt: np.dtype, shape):
    p = tr.prims
    if type(exponent) in (bool, int, float) or isinstance(exponent, np.generic):
        e = np.asarray(exponent).astype(out_dt)[()]  # a literal of the program
        if e == 0.5:
            return p.ufunc("sqrt", vals[:1], out_dt)
        if e == 2.0:
            return p.ufunc("square", vals[:1], out_dt)
        if e == -1.0:
            return p.ufunc("reciprocal", vals[:1], out_dt)
        return p.ufunc("power", vals, out_dt)
    # a value known only at run time: numpy decides per call, so must we. Both
    # sides run on every element: where sqrt is not taken its operand is
    # maximum(x, 0) (maximum(x, -inf) = x where it is, NaN kept), so that the
    # sqrt of a negative x raises no flag numpy's pow does not. (Not a select
    # of x by the same condition: LLVM would see through it.)
    def splat(v):
        return p.broadcast(p.constant(v, out_dt), shape)

    is_half = p.compare("eq", vals[1], splat(0.5))
    floor = p.select(is_half, splat(-math.inf), splat(0.0))
    root = p.ufunc("maximum", [vals[0], floor], out_dt)
    return p.select(is_half, p.ufunc("sqrt", [root], out_dt), p.ufunc("power", vals, out_dt))


@ufunc_method("__call__")
def call(tr, ufunc, *inputs, out=None, dtype=None, casting="same_kind", where=True,
         signature=None, order="K", subok=True, **other):
    if other:  # axes=, axis=, keepdims=, extobj=, ...: numpy handles them eagerly
        raise Unsupported(f"ufunc keyword(s) {', '.join(sorted(other))}")
    if order not in ("K", "A", "C") or subok is not True:
        # numpy's errors for a bad order; order="F" is a layout the graph does not make
        numpy_check(ufunc, inputs[: ufunc.nin], order=order, subok=subok)
        if order not in ("K", "A", "C"):
            raise Unsupported(f"order={order!r} in a ufunc call")
    if len(inputs) > ufunc.nin:  # np.add(a, b, c): positional out
        if out is not None:
            raise TypeError("cannot specify 'out' as both a positional and keyword argument")
        inputs, out = inputs[: ufunc.nin], inputs[ufunc.nin:]
    if where is not True and out is None:
        raise Unsupported("where= without out= (numpy leaves the other elements unset)")
    if ufunc.nout != 1:
        return _multi_output(tr, ufunc, inputs, out, dtype, casting, where, signature)
    if ufunc is np.matmul:
        if where is not True:
            raise Unsupported("where= in a matmul call")
        from .linalg import matmul

        return matmul(tr, *inputs, out=out, dtype=dtype, casting=casting)
    out = check_out(out)
    if out is not None:  # numpy's own errors for the output, in numpy's order
        if out._readonly:
            raise ValueError("output array is read-only")
        numpy_check(ufunc, inputs, out, dtype=dtype, casting=casting, signature=signature)
    res = apply(tr, ufunc, inputs, dtype, casting, signature)
    if out is None:
        return res
    return store_out(tr, out, _masked(res, out, where, casting, ufunc.__name__), casting,
                     ufunc.__name__)


def _masked(res: TracedArray, out: TracedArray, where, casting: str, name: str) -> TracedArray:
    """`where=`: out keeps its value where the mask is False (numpy casts the
    result into out's dtype and writes only the selected elements)."""
    if where is True:
        return res
    if not np.can_cast(res.dtype, out.dtype, casting=casting):
        raise TypeError(f"Cannot cast {name} output from {res.dtype!r} to {out.dtype!r} "
                        f"with casting rule {casting!r}")
    return np.where(where, res.astype(out.dtype), out)


def _multi_output(tr, ufunc, inputs, out, dtype, casting, where, signature):
    """divmod, modf, frexp: each output is computed, then stored into its
    `out=` array (numpy returns the out arrays themselves)."""
    if out is None:
        outs = (None,) * ufunc.nout
    else:
        outs = tuple(out) if isinstance(out, tuple) else (out,)
    if len(outs) != ufunc.nout:
        raise ValueError(f"The 'out' tuple must have exactly {ufunc.nout} entries: one per "
                         "ufunc output")
    for o in outs:
        if o is not None and not isinstance(o, TracedArray):
            raise Unsupported("out= must be an input array or an array made in the function")
        if o is not None and o._readonly:
            raise ValueError("output array is read-only")
    kw = {k: v for k, v in (("dtype", dtype), ("signature", signature)) if v is not None}
    with np.errstate(all="ignore"), warnings.catch_warnings():  # numpy's errors for the call
        warnings.simplefilter("ignore")
        ufunc(*[_stand_in(x) for x in inputs], casting=casting,
              out=tuple(None if o is None else np.empty(0, o.dtype) for o in outs), **kw)
    if ufunc is np.divmod and signature is None:
        res = (apply(tr, np.floor_divide, inputs, dtype, casting),
               apply(tr, np.remainder, inputs, dtype, casting))
    else:  # modf, frexp (and divmod with signature=): numpy's own loops
        res = tr.eager_call(f"np.{ufunc.__name__} is not captured", ufunc, tuple(inputs),
                            {"casting": casting, **kw})
    if all(o is None for o in outs):
        return tuple(res)
    for o, r in zip(outs, res):
        if o is not None:
            store_out(tr, o, _masked(r, o, where, casting, ufunc.__name__), casting,
                      ufunc.__name__)
    return tuple(r if o is None else o for o, r in zip(outs, res))


@ufunc_method("outer")
def outer(tr, ufunc, a, b, **kwargs):
    a, b = tr.lift(a), tr.lift(b)
    ra = np.reshape(a, a.shape + (1,) * b.ndim)
    return call(tr, ufunc, ra, b, **kwargs)
