"""The proxy array. Operators and methods forward to numpy functions so that
every call meets one rule table (`registry.FUNCTIONS`, `registry.UFUNCS`)."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
from xdsl.ir import SSAValue

from . import registry
from .tracer import Unsupported


class TracedArray:
    __array_priority__ = 1000.0
    __slots__ = ("_t", "_st", "_steps", "shape", "dtype", "_cache", "_weak", "_scalar",
                 "_readonly", "__weakref__")

    def __init__(self, tracer, storage, steps, weak=None, scalar=False):
        self._t = tracer
        self._st = storage
        self._steps = steps
        self._weak = weak  # python type for NEP 50 weak scalars (float inputs)
        self._scalar = scalar  # numpy would hand back a scalar, not a 0-d array
        self._readonly = storage.readonly
        if steps:
            self.shape = self.dtype = None  # set by _v() from the cached value
        else:
            self.shape, self.dtype = storage.shape, storage.dtype
        self._cache = (storage.version, storage.value)
        tracer.live.add(self)

    def _v(self) -> SSAValue:
        """The current SSA value of this array (re-derived after writes)."""
        version, v = self._cache
        st = self._st
        if version != st.version:
            v = st.value
            for step in self._steps:
                v = step.apply(self._t.prims, v)
            self._cache = (st.version, v)
        return v

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        if name == "_cache" and self._steps:
            t = value[1].type
            from .dtypes import from_ir

            object.__setattr__(self, "shape", t.get_shape())
            object.__setattr__(self, "dtype", from_ir(t.element_type))

    def _dtype_operand(self):
        """What `ufunc.resolve_dtypes` should see: a Python type for weak scalars."""
        return self._weak if self._weak is not None else self.dtype

    def _promo(self):
        """What `np.result_type` should see: a Python value for weak scalars
        (result_type treats values, not the types float/int, as weak)."""
        return self._weak(0) if self._weak is not None else self.dtype

    # ---- numpy protocols ----------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return registry.call_ufunc(self._t, ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return registry.call_function(self._t, func, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        (arr,) = self._t.graph_break("conversion of a traced array to numpy (np.asarray/__array__)", [self])
        return arr if dtype is None else arr.astype(dtype)

    # ---- attributes ---------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def T(self):
        return self if self._scalar else np.transpose(self)  # a numpy scalar's .T is itself

    @property
    def mT(self):
        return np.swapaxes(self, -1, -2)

    @property
    def real(self):
        return self

    @property
    def imag(self):
        return np.zeros_like(self)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        for i in range(self.shape[0]):
            yield self[i]

    __hash__ = None  # type: ignore[assignment]

    # ---- conversions: graph breaks ------------------------------------------
    def _concrete(self, what: str):
        (arr,) = self._t.graph_break(what, [self])
        return arr

    def __bool__(self):
        return bool(self._concrete("bool() of a traced value (data-dependent Python control flow)"))

    def __int__(self):
        return int(self._concrete("int() of a traced value"))

    def __float__(self):
        return float(self._concrete("float() of a traced value"))

    def __complex__(self):
        return complex(self._concrete("complex() of a traced value"))

    def __index__(self):
        arr = self._concrete("use of a traced value as a Python index")
        return arr.__index__()

    def item(self, *args):
        return self._concrete(".item() of a traced value").item(*args)

    def tolist(self):
        return self._concrete(".tolist() of a traced value").tolist()

    def __repr__(self):
        return repr(self._concrete("repr() of a traced value"))

    def __str__(self):
        return str(self._concrete("str() of a traced value"))

    def __format__(self, spec):
        return format(self._concrete("format() of a traced value"), spec)

    # ---- indexing -------------------------------------------------------------
    def __getitem__(self, key):
        from .rules import indexing

        try:
            return indexing.getitem(self, key)
        except Unsupported as e:
            return self._t.eager_call(f"indexing: {e}", operator.getitem, (self, key), {})

    def __setitem__(self, key, value):
        from .rules import indexing

        try:
            indexing.setitem(self, key, value)
        except Unsupported as e:
            self._t.eager_call(f"index assignment: {e}", operator.setitem, (self, key, value), {},
                               mutates=self)


def _python_scalar(x) -> bool:
    """A Python scalar in the user's program: a literal or a traced float argument."""
    return type(x) in (bool, int, float) or (isinstance(x, TracedArray) and x._weak is not None)


def _as_python(r, *operands):
    """An operator whose operands are all Python scalars is Python arithmetic in
    the eager program: its result is a Python float/bool, not a numpy scalar
    (an explicit `np.multiply(s, 2.0)` still gives np.float64)."""
    if isinstance(r, TracedArray) and all(_python_scalar(o) for o in operands):
        # (an int only from Python ints derived from a traced Python bool: int64 arithmetic)
        r._weak = {"f": float, "b": bool, "i": int}.get(r.dtype.kind)
    return r


def _binop(ufunc, name):
    def fwd(self, other):
        return _as_python(ufunc(self, other), self, other)

    def rev(self, other):
        return _as_python(ufunc(other, self), other, self)

    def inplace(self, other):
        if self._scalar:  # numpy scalars and Python floats are immutable: x += y rebinds x
            return fwd(self, other)
        return ufunc(self, other, out=(self,))

    fwd.__name__, rev.__name__, inplace.__name__ = f"__{name}__", f"__r{name}__", f"__i{name}__"
    return fwd, rev, inplace


for _name, _uf in [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                   ("truediv", np.true_divide), ("floordiv", np.floor_divide),
                   ("mod", np.remainder), ("pow", np.power), ("matmul", np.matmul),
                   ("and", np.bitwise_and), ("or", np.bitwise_or), ("xor", np.bitwise_xor),
                   ("lshift", np.left_shift), ("rshift", np.right_shift)]:
    _f, _r, _i = _binop(_uf, _name)
    setattr(TracedArray, f"__{_name}__", _f)
    setattr(TracedArray, f"__r{_name}__", _r)
    setattr(TracedArray, f"__i{_name}__", _i)

for _name, _uf in [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                   ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)]:
    setattr(TracedArray, f"__{_name}__",
            (lambda uf: lambda self, other: _as_python(uf(self, other), self, other))(_uf))

def _unary(uf):
    def op(self):
        if self._weak is bool:
            # a Python bool (a comparison of Python floats): Python's int
            # arithmetic (~True == -2, -True == -1, +True == 1), an int result
            r = uf(self.astype(np.int64))
            r._weak = int
            return r
        return _as_python(uf(self), self)
    return op


for _name, _uf in [("neg", np.negative), ("pos", np.positive), ("abs", np.absolute),
                   ("invert", np.invert)]:
    setattr(TracedArray, f"__{_name}__", _unary(_uf))

def _fast_pow_op(self, exponent):
    """numpy's `ndarray.__pow__` takes fast paths for some scalar exponents
    (sqrt for 0.5, reciprocal for -1, ...) that round differently from `pow`:
    mirror them so `x ** 0.5` is numpy's `x ** 0.5`. (Its `** 0` fast path,
    ones_like, equals pow(x, 0) == 1 everywhere, NaN included: no entry.)"""
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float, np.integer, np.floating)):
        return None
    e = float(exponent)
    if self.dtype.kind in "fc":
        return {1.0: np.positive, -1.0: np.reciprocal, 0.5: np.sqrt, 2.0: np.square}.get(e)
    if e == 2.0 and self.dtype.kind in "iu":
        return np.square
    return None


def _pow(self, other):
    if self._weak is None:  # a Python float's `**` is Python's, not ndarray's
        fast = _fast_pow_op(self, other)
        if fast is not None and np.result_type(self._promo(), other) == self.dtype:
            return fast(self)
    return _as_python(np.power(self, other), self, other)


def _ipow(self, other):
    if self._scalar:  # numpy scalars and Python floats are immutable: x **= y rebinds x
        return _pow(self, other)
    fast = _fast_pow_op(self, other)
    if fast is not None and np.result_type(self._promo(), other) == self.dtype:
        return fast(self, out=(self,)) if fast is not np.positive else self
    return np.power(self, other, out=(self,))


TracedArray.__pow__ = _pow  # type: ignore[assignment]
TracedArray.__ipow__ = _ipow  # type: ignore[assignment]

TracedArray.__divmod__ = lambda self, o: (self // o, self % o)  # type: ignore[attr-defined]
TracedArray.__rdivmod__ = lambda self, o: (o // self, o % self)  # type: ignore[attr-defined]


def _method(fn):
    def m(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    m.__name__ = fn.__name__
    return m


for _fn in [np.sum, np.prod, np.mean, np.var, np.std, np.max, np.min, np.argmax, np.argmin,
            np.all, np.any, np.cumsum, np.cumprod, np.clip, np.ravel, np.squeeze,
            np.swapaxes, np.take, np.dot, np.round, np.trace, np.diagonal, np.nonzero,
            np.repeat, np.sort, np.argsort, np.searchsorted, np.conjugate]:
    setattr(TracedArray, _fn.__name__, _method(_fn))
TracedArray.conj = TracedArray.conjugate  # type: ignore[attr-defined]


def _reshape(self, *shape, order="C", copy=None):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return np.reshape(self, shape, order=order, copy=copy)


def _transpose(self, *axes):
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    return np.transpose(self, axes or None)


def _astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
    return registry.astype(self, dtype, casting=casting, copy=copy)


def _copy(self, order="C"):
    return np.copy(self)


def _flatten(self, order="C"):
    return np.copy(np.ravel(self, order=order))


def _fill(self, value):
    self[...] = value


def _view(self, dtype=None, type=None):
    if dtype is not None and np.dtype(dtype) != self.dtype:
        raise Unsupported("ndarray.view with another dtype")
    return self[...]


TracedArray.reshape = _reshape  # type: ignore[attr-defined]
TracedArray.transpose = _transpose  # type: ignore[attr-defined]
TracedArray.astype = _astype  # type: ignore[attr-defined]
TracedArray.copy = _copy  # type: ignore[attr-defined]
TracedArray.flatten = _flatten  # type: ignore[attr-defined]
TracedArray.fill = _fill  # type: ignore[attr-defined]
TracedArray.view = _view  # type: ignore[attr-defined]
TracedArray.__copy__ = _copy  # type: ignore[attr-defined]


def is_traced(x: Any) -> bool:
    return isinstance(x, TracedArray)
