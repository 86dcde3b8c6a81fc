"""The proxy array. Operators and methods forward to numpy functions so that
every call meets one rule table (`registry.FUNCTIONS`, `registry.UFUNCS`)."""

from __future__ import annotations

import itertools
import operator
import weakref
from typing import Any

import numpy as np
from xdsl.ir import SSAValue
from dialects.symbols import SymDim, SymSize, prod_dims, specialized, to_internal, to_user

from . import conversions, registry
from dialects.dtypes import ExternOnlyError, kind as dtype_kind

from .tracer import Unsupported, c_strides
from .views import ReshapeStep, np_apply_all, strided_dummy


class _Origin:
    """What numpy's layout of a storage is, where it is known exactly: the
    caller's array or an array an eager piece made (strides, whether it owns
    its memory, whether its `base` is None). Storages the graph makes have no
    entry: numpy's layout of an op's result is not modelled."""

    __slots__ = ("strides", "owndata", "no_base", "aligned")

    def __init__(self, arr):
        self.strides = arr.strides
        self.owndata = arr.flags.owndata
        self.no_base = arr.base is None
        self.aligned = arr.flags.aligned


_ORIGINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Storage -> _Origin
_ROOTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Storage -> ref to its array
_FLAG_BITS = {"c_contiguous": 0x1, "f_contiguous": 0x2, "owndata": 0x4, "aligned": 0x100,
              "writeable": 0x400, "writebackifcopy": 0x2000}
_FLAG_KEYS = {"C_CONTIGUOUS": "c_contiguous", "C": "c_contiguous", "CONTIGUOUS": "c_contiguous",
              "F_CONTIGUOUS": "f_contiguous", "F": "f_contiguous", "FORTRAN": "f_contiguous",
              "OWNDATA": "owndata", "O": "owndata", "WRITEABLE": "writeable", "W": "writeable",
              "ALIGNED": "aligned", "A": "aligned", "WRITEBACKIFCOPY": "writebackifcopy",
              "X": "writebackifcopy", "BEHAVED": "behaved", "B": "behaved", "CARRAY": "carray",
              "CA": "carray", "FARRAY": "farray", "FA": "farray", "FNC": "fnc", "FORC": "forc"}


def _keep(*_):
    """(a `weakref.finalize` callback: its arguments live until then)"""


def _contiguous_layouts(shape, itemsize: int) -> list[tuple[int, ...]]:
    """The strides of `shape` contiguous in each order of its axes."""
    if len(shape) > 6:
        _cannot_capture("the memory layouts of an array of more than 6 dimensions")
    out = []
    for perm in itertools.permutations(range(len(shape))):  # outermost axis first
        inner = c_strides(tuple(shape[i] for i in perm), itemsize)
        strides = [0] * len(shape)
        for k, i in enumerate(perm):
            strides[i] = inner[k]
        out.append(tuple(strides))
    return out


def _cannot_capture(reason: str):
    """numpy's answer depends on what capture does not model (the Python
    object identity of the caller's array, numpy's memory layout of an op's
    result): the call runs eagerly (`fullgraph=True`: an error)."""
    raise Unsupported(reason)


class TracedArray:
    __array_priority__ = 1000.0
    _stands_in = True  # `type(x)` inside a trace answers `x.__class__` (capture/sources.py)
    __slots__ = ("_t", "_st", "_steps", "_shape", "_dtype", "_cache", "_weak", "_scalar",
                 "_readonly", "__weakref__")

    def __init__(self, tracer, storage, steps, weak=None, scalar=False):
        self._t = tracer
        self._st = storage
        self._steps = steps
        self._weak = weak  # python type for NEP 50 weak scalars (float inputs)
        self._scalar = scalar  # numpy would hand back a scalar, not a 0-d array
        self._readonly = storage.readonly
        if steps:
            self._shape = self._dtype = None  # set by _v() from the cached value
        else:
            self._shape, self._dtype = storage.shape, storage.dtype
            ref = _ROOTS.get(storage)
            if ref is None or ref() is None:
                _ROOTS[storage] = weakref.ref(self)
            if storage not in _ORIGINS:
                if storage.source is not None:
                    _ORIGINS[storage] = _Origin(tracer.source_value(storage.source))
                elif storage.concrete is not None and storage.version == 0:
                    # made by an eager piece (later concrete values of any
                    # storage are the compiled program's, not numpy's)
                    _ORIGINS[storage] = _Origin(storage.concrete)
        self._cache = (storage.version, storage.value)
        tracer.live.add(self)

    # ---- what the user's code sees of the type --------------------------------
    @property
    def __class__(self):
        """`isinstance(x, np.ndarray)` is True for a traced array (numpy's own
        dispatch and `type(x)` still see TracedArray); a traced scalar is not
        an ndarray, as a numpy scalar is not."""
        return TracedArray if self._scalar else np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        shape = self._shape
        # the user's code sees a symbolic size as a SymSize (dialects.symbols)
        if shape and any(type(d) is SymDim for d in shape) and conversions.called_from_user():
            return to_user(shape)
        return shape

    @shape.setter
    def shape(self, new):
        """`x.shape = s`: x itself becomes a view of its data with shape s,
        where numpy's layout allows it (numpy's own errors otherwise)."""
        if self._scalar:
            raise AttributeError("attribute 'shape' of 'numpy.generic' objects is not writable")
        st = self._st
        if not self._steps and st.source is not None:
            _cannot_capture("assigning .shape of the caller's array (numpy reshapes the "
                            "caller's object)")
        o = _ORIGINS.get(st)
        if o is not None:
            layouts = [o.strides]
        else:
            # numpy's layout of an array the graph made is contiguous in some
            # order of its axes (C for most ops, the inputs' order for `K`):
            # the answer must not depend on which
            layouts = _contiguous_layouts(st.shape, st.dtype.itemsize)
        answers = []
        for strides in layouts:
            dummy = np_apply_all(self._steps, strided_dummy(st.shape, strides, st.dtype))
            try:
                dummy.shape = new  # numpy's errors: the size, a layout it cannot view that way
                answers.append((None, tuple(dummy.shape)))
            except (AttributeError, ValueError) as e:
                answers.append((e, None))
        if any(type(a[0]) is not type(answers[0][0]) for a in answers):
            _cannot_capture("assigning .shape of an array the graph made (whether numpy can "
                            "view its layout that way)")
        if answers[0][0] is not None:
            raise answers[0][0]
        step = ReshapeStep(answers[0][1], tuple(self._shape))
        v = step.apply(self._t.prims, self._v())
        self._steps = self._steps + (step,)
        self._cache = (st.version, v)

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @dtype.setter
    def dtype(self, new):
        if self._scalar:
            raise AttributeError("attribute 'dtype' of 'numpy.generic' objects is not writable")
        if np.dtype(new) == self._dtype:
            return
        _cannot_capture("assigning .dtype (a reinterpretation of the memory)")

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
            from dialects.dtypes import from_ir

            object.__setattr__(self, "_shape", t.get_shape())
            object.__setattr__(self, "_dtype", from_ir(t.element_type))

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
        conversions.leaving_graph(self)  # inside lowering.grad: an error, not a lost gradient
        (arr,) = self._t.graph_break("conversion of a traced array to numpy (np.asarray/__array__)", [self])
        return arr if dtype is None else arr.astype(dtype)

    # ---- attributes ---------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = prod_dims(self._shape if self._shape is not None else self.shape)
        return SymSize(n) if type(n) is SymDim and conversions.called_from_user() else n

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
        if self.ndim < 2:
            raise ValueError("matrix transpose with ndim < 2 is undefined")
        return np.swapaxes(self, -1, -2)

    @property
    def real(self):
        if self.dtype.kind == "c":
            return self._part("real")
        return self  # numpy's `x.real is x`

    @real.setter
    def real(self, value):
        if self.dtype.kind == "c":
            _cannot_capture("assigning .real of a complex array")
        self[...] = value

    @property
    def imag(self):
        if self.dtype.kind == "c":
            return self._part("imag")
        z = np.zeros_like(self)
        z._readonly = True  # numpy's imaginary part of a real array is read-only
        return z

    def _part(self, which: str):
        """.real / .imag of a complex array: a copy made by numpy, not the
        view numpy gives (a write through it, which would reach the complex
        array in numpy, stops capture: `tracer._no_write_through`)."""
        shape, dt = self.shape, np.dtype(self.dtype.char.lower())  # F -> f, D -> d
        (v,) = self._t.prims.routine(f"np.{which}", [self._v()], {}, [(shape, dt)])
        r = self._t.wrap(v, scalar=self._scalar)
        r._st.part_of = which
        return r

    @imag.setter
    def imag(self, value):
        raise TypeError("array does not have imaginary part to set")

    # ---- memory layout --------------------------------------------------------
    def _layout(self, what: str, get):
        """`get` of an array with numpy's layout of this one (strides,
        contiguity): a layout-only dummy. The layout is numpy's exactly for
        the caller's arrays, an eager piece's results and views of them. For
        an array the graph made, numpy's layout is contiguous in some order of
        its axes (C for most ops, the operands' order for order="K"): the
        answer is the one all those orders give, or, where they differ, the
        call runs eagerly (numpy's layout of an op's result is not modelled)."""
        if self._scalar:
            return get(np.asarray(self.dtype.type(0)))
        st = self._st
        o = _ORIGINS.get(st)
        layouts = ([o.strides] if o is not None
                   else _contiguous_layouts(st.shape, st.dtype.itemsize))
        answers = set()
        for strides in layouts:
            try:
                answers.add(get(self._view_dummy(strides)))
            except (AttributeError, ValueError):  # numpy would have copied, not viewed
                answers.add(None)
        if len(answers) != 1 or None in answers:
            _cannot_capture(f"{what} of an array the graph made (numpy's memory layout of an "
                            "op's result is not modelled)")
        return answers.pop()

    def _known_strides(self) -> tuple[int, ...] | None:
        """numpy's strides of this array where they are known exactly (the
        caller's arrays, an eager piece's results and views of them; see
        `_layout`) and sizes are not symbols, else None: nothing is
        recorded or refused."""
        o = None if self._scalar else _ORIGINS.get(self._st)
        st = self._st
        if o is None or any(type(d) is SymDim for d in (*st.shape, *self._v().type.get_shape())):
            return None  # (a size symbol: the dummy would specialize it)
        try:
            return self._view_dummy(o.strides).strides
        except (AttributeError, ValueError):
            return None

    def _view_dummy(self, strides):
        """A layout-only dummy of this array: its storage's shape with
        `strides`, through the view steps taken since (numpy's AttributeError
        or ValueError where a step would copy)."""
        st = self._st
        return np_apply_all(self._steps, strided_dummy(st.shape, strides, st.dtype))

    def _owner(self, what: str):
        """The array that owns this one's memory (numpy's `base` of a view),
        None for an owner. Known where numpy's layout is: an array the graph
        made may be numpy's view of a temporary (`np.tile`, a reshape that
        copies), which capture does not model."""
        st = self._st
        o = _ORIGINS.get(st)
        if o is None:
            _cannot_capture(f"{what} of an array the graph made (numpy's ownership of its memory)")
        if not o.no_base:
            _cannot_capture(f"{what} of a view of memory outside the function")
        if not self._steps:
            return None
        ref = _ROOTS.get(st)
        root = ref() if ref is not None else None
        return root if root is not None else TracedArray(self._t, st, ())

    @property
    def strides(self) -> tuple[int, ...]:
        for d in self.shape:  # (strides follow from sizes: the program is for them)
            specialized(d)
        return self._layout(".strides", lambda a: a.strides)

    @strides.setter
    def strides(self, value):
        _cannot_capture("assigning .strides")

    @property
    def flags(self) -> "_Flags":
        return _Flags(self)

    @property
    def base(self):
        if self._scalar:
            return None
        return self._owner(".base")

    def _owndata(self) -> bool:
        if self._scalar:
            return True
        if self._steps:
            return False
        o = _ORIGINS.get(self._st)
        if o is None:
            _cannot_capture(".flags.owndata of an array the graph made (numpy's ownership of "
                            "its memory)")
        return o.owndata

    def _aligned(self) -> bool:
        o = None if self._scalar else _ORIGINS.get(self._st)
        aligned = self._layout(".flags.aligned", lambda a: a.flags.aligned)
        return aligned and (o is None or o.aligned)

    def setflags(self, write=None, align=None, uic=None):
        if uic:
            raise ValueError("cannot set WRITEBACKIFCOPY flag to True")
        if align is not None and not (align and self._aligned()):
            _cannot_capture("setflags(align=...)")
        if write is None:
            return
        if not write or self._readonly or _ORIGINS.get(self._st) is not None:
            # a read-only flag is the Python object's (the caller's array, one
            # handed back, would have to carry it); whether numpy lets an array
            # be made writeable depends on its base chain outside the function
            _cannot_capture(f"setflags(write={bool(write)})")

    @property
    def flat(self) -> "_FlatIter":
        return _FlatIter(self)

    @flat.setter
    def flat(self, value):
        self._t.eager_call("assignment to .flat (numpy repeats the value)", _set_flat,
                           (self, value), {}, mutates=self)

    def _exposed(self, what: str, get):
        """An attribute that hands out the memory itself: read from the
        concrete array at a graph break, the array counted as written (a write
        through it cannot be seen). The concrete array must have numpy's
        layout (a written input's concrete value is the compiled program's)."""
        strides = self._layout(what, lambda a: a.strides)

        def read(a):
            if not all(n == 1 or s == t for n, s, t in zip(a.shape, a.strides, strides)):
                _cannot_capture(f"{what} of a traced array whose memory the compiled program "
                                "laid out")
            return get(a)

        return self._t.eager_call(f"{what} of a traced array (its memory)", read, (self,), {},
                                  mutates=None if self._readonly else self)

    @property
    def data(self):
        return self._exposed(".data", lambda a: a.data)

    @property
    def ctypes(self):
        return self._exposed(".ctypes", lambda a: a.ctypes)

    # numpy's conversion of a non-ndarray reads these before `__array__`: the
    # same conversion (a graph break), the concrete array kept alive as long
    # as this one (an array numpy builds from them has this one as its base)
    @property
    def __array_interface__(self):
        arr = self.__array__()
        weakref.finalize(self, _keep, arr)
        return arr.__array_interface__

    @property
    def __array_struct__(self):
        arr = self.__array__()
        weakref.finalize(self, _keep, arr)
        return arr.__array_struct__

    def __dlpack__(self, **kwargs):
        return self._exposed("__dlpack__", lambda a: a.__dlpack__(**kwargs))

    def __dlpack_device__(self):
        return np.empty(0).__dlpack_device__()

    @property
    def device(self) -> str:
        return "cpu"

    def to_device(self, device, /, *, stream=None):
        np.empty(0).to_device(device, stream=stream)  # numpy's errors for other devices
        return self

    def __array_namespace__(self, *, api_version=None):
        return np.empty(0).__array_namespace__(api_version=api_version)

    def __array_wrap__(self, array, context=None, return_scalar=False):
        if isinstance(array, TracedArray):
            return array[()] if return_scalar and array.ndim == 0 else array
        return np.ndarray.__array_wrap__(np.empty(0, self.dtype), array, context, return_scalar)

    def __array_finalize__(self, obj):
        return None

    def __class_getitem__(cls, item):
        return np.ndarray[item]

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return specialized(self.shape[0])  # (len() takes an int: the program is for it)

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        for i in range(specialized(self.shape[0])):
            yield self[i]

    def __contains__(self, value) -> bool:
        return bool((self == value).any())  # numpy's `in`

    def __delitem__(self, key):
        raise ValueError("cannot delete array elements")

    def __hash__(self):
        """numpy scalars hash by value (a graph break); arrays are unhashable."""
        if not self._scalar:
            raise TypeError("unhashable type: 'numpy.ndarray'")
        v = self._concrete("hash() of a traced scalar (numpy scalars hash by value)")[()]
        return hash(self._weak(v) if self._weak is not None else v)

    def __copy__(self):
        return self if self._scalar else np.copy(self)

    def __deepcopy__(self, memo):
        return self if self._scalar else np.copy(self)

    def __reduce_ex__(self, protocol):
        arr = self._concrete("pickling a traced value")
        if self._scalar:
            v = arr[()]
            return (self._weak, (self._weak(v),)) if self._weak is not None \
                else v.__reduce_ex__(protocol)
        return arr.__reduce_ex__(protocol)

    def __reduce__(self):
        return self.__reduce_ex__(2)

    def __setstate__(self, state):
        _cannot_capture("ndarray.__setstate__ (replaces the array's memory)")

    def __sizeof__(self) -> int:
        return self._concrete("sys.getsizeof() of a traced array").__sizeof__()

    # ---- conversions: graph breaks ------------------------------------------
    def _concrete(self, what: str, specialize: str | None = None):
        """The value, for Python: a graph break, unless it is made from
        constants and (`specialize`: "value" for a Python scalar, "index"
        for a size or index) arguments the program may be specialized on."""
        (arr,) = self._t.graph_break(what, [self], specialize=specialize)
        return arr

    def __bool__(self):
        return bool(self._concrete("bool() of a traced value (data-dependent Python control flow)",
                                   "value"))

    def __int__(self):
        return int(self._concrete("int() of a traced value", "index"))

    def __float__(self):
        conversions.leaving_graph(self, element=True)  # `real[i] = x` inside lowering.grad
        return float(self._concrete("float() of a traced value", "value"))

    def __complex__(self):
        return complex(self._concrete("complex() of a traced value", "value"))

    def __index__(self):
        arr = self._concrete("use of a traced value as a Python index", "index")
        return arr.__index__()

    def item(self, *args):
        return self._concrete(".item() of a traced value", "value").item(*args)

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

        key = to_internal(key)
        try:
            if self.dtype.kind == "c":
                return indexing.complex_getitem(self, key)
            return indexing.getitem(self, key)
        except (Unsupported, ExternOnlyError) as e:
            return self._t.eager_call(f"indexing: {e}", operator.getitem, (self, key), {})

    def __setitem__(self, key, value):
        from .rules import indexing

        key = to_internal(key)
        try:
            indexing.setitem(self, key, value)
        except (Unsupported, ExternOnlyError) as e:
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
        r._weak = {"f": float, "b": bool, "i": int}.get(dtype_kind(r.dtype))
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
    if dtype_kind(self.dtype) in "fc":
        return {1.0: np.positive, -1.0: np.reciprocal, 0.5: np.sqrt, 2.0: np.square}.get(e)
    if e == 2.0 and self.dtype.kind in "iu":
        return np.square
    return None


def _python_float_pow(a, b) -> bool:
    """`a ** b` between Python numbers, one a float: Python's (C's) pow, which
    numpy's `power` differs from only in its x**0.5 fast path (sqrt: -0.0**0.5
    is -0.0 there, 0.0 in Python)."""
    return (_python_scalar(a) and _python_scalar(b)
            and float in (getattr(a, "_weak", type(a)), getattr(b, "_weak", type(b))))


def _pow(self, other):
    if self._weak is None:  # a Python float's `**` is Python's, not ndarray's
        fast = _fast_pow_op(self, other)
        if fast is not None and np.result_type(self._promo(), other) == self.dtype:
            return fast(self)
    if _python_float_pow(self, other):
        return _as_python(np.float_power(self, other), self, other)
    return _as_python(np.power(self, other), self, other)


def _rpow(self, other):
    if _python_float_pow(other, self):
        return _as_python(np.float_power(other, self), other, self)
    return _as_python(np.power(other, self), other, self)


def _ipow(self, other):
    if self._scalar:  # numpy scalars and Python floats are immutable: x **= y rebinds x
        return _pow(self, other)
    fast = _fast_pow_op(self, other)
    if fast is not None and np.result_type(self._promo(), other) == self.dtype:
        return fast(self, out=(self,)) if fast is not np.positive else self
    return np.power(self, other, out=(self,))


TracedArray.__pow__ = _pow  # type: ignore[assignment]
TracedArray.__rpow__ = _rpow  # type: ignore[assignment]
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
    if isinstance(dtype, _type) and issubclass(dtype, np.ndarray):  # x.view(np.ndarray)
        dtype, type = None, dtype
    if type is not None and type is not np.ndarray:
        _cannot_capture("ndarray.view as a subclass")
    if dtype is not None and np.dtype(dtype) != self.dtype:
        _cannot_capture("ndarray.view with another dtype (a reinterpretation of the memory)")
    return self[...]


_type = type


def _sort(self, axis=-1, kind=None, order=None, *, stable=None):
    """In place, as numpy's: the sorted values written into the array."""
    if self._readonly:
        raise ValueError("assignment destination is read-only")
    kw = {} if stable is None else {"stable": stable}
    self[...] = np.sort(self, axis=axis, kind=kind, order=order, **kw)


def _partition(self, kth, axis=-1, kind="introselect", order=None):
    if self._readonly:
        raise ValueError("assignment destination is read-only")
    self[...] = np.partition(self, kth, axis=axis, kind=kind, order=order)


def _compress(self, condition, axis=None, out=None):
    return np.compress(condition, self, axis=axis, out=out)


def _put(self, indices, values, mode="raise"):
    np.put(self, indices, values, mode=mode)


def _byteswap(self, inplace=False):
    if not inplace:
        return self._t.eager_call("ndarray.byteswap has no capture rule", np.ndarray.byteswap,
                                  (self,), {})
    self._t.eager_call("ndarray.byteswap has no capture rule", np.ndarray.byteswap,
                       (self, True), {}, mutates=self)
    return self  # numpy returns the array itself


def _getfield(self, dtype, offset=0):
    if np.dtype(dtype) == self.dtype and offset == 0:
        return self[...]  # numpy's view of the whole field
    _cannot_capture("ndarray.getfield (a reinterpretation of the memory)")


def _resize(self, *new_shape, refcheck=True):
    # reallocates the array object's memory in place: not modelled
    _cannot_capture("ndarray.resize (reallocates the array in place)")


def _eager_method(name: str, inplace: bool = False):
    """A method with no capture rule: numpy's own on the concrete array (a
    graph break); an in-place one writes the array's storage."""
    meth = getattr(np.ndarray, name)

    def m(self, *args, **kwargs):
        return self._t.eager_call(f"ndarray.{name} has no capture rule", meth, (self, *args),
                                  kwargs, mutates=self if inplace else None)

    m.__name__ = name
    return m


def _set_flat(a, value):
    a.flat = value


def _set_flat_item(a, key, value):
    a.flat[key] = value


class _FlatIter:
    """`x.flat`: indexing and iteration over x in C order (numpy's flatiter:
    a read is a copy, a write repeats a shorter value)."""

    __slots__ = ("_x",)

    def __init__(self, x):
        self._x = x

    @property
    def base(self):
        return self._x

    def __len__(self) -> int:
        return self._x.size

    def __iter__(self):
        return iter(self._x.reshape(-1))

    def __getitem__(self, key):
        r = self._x.reshape(-1)[key]
        return np.copy(r) if isinstance(r, TracedArray) and not r._scalar else r

    def __setitem__(self, key, value):
        x = self._x
        scalar = type(value) in (bool, int, float) or isinstance(value, np.generic) or (
            isinstance(value, TracedArray) and value.ndim == 0)
        if scalar and x._t.reshape_is_view(x, (x.size,)):
            x.reshape(-1)[key] = value
            return
        x._t.eager_call("x.flat[...] = (numpy repeats the value)", _set_flat_item,
                        (x, key, value), {}, mutates=x)

    def __array__(self, dtype=None, copy=None):
        return self._x.reshape(-1).__array__(dtype)

    def copy(self):
        return self._x.flatten()

    def __getattr__(self, name):  # coords, index: the concrete iterator's
        return getattr(self._x._concrete(f".flat.{name} of a traced array").flat, name)


class _Flags:
    """`x.flags`: numpy's flags object for a traced array. Writeability is
    the array's own; contiguity and alignment come from numpy's layout
    (`TracedArray._layout`)."""

    __slots__ = ("_x",)

    def __init__(self, x):
        object.__setattr__(self, "_x", x)

    def _get(self, name: str) -> bool:
        x = self._x
        if name == "writeable":
            return not x._readonly and not x._scalar
        if name == "writebackifcopy":
            return False
        if name == "owndata":
            return x._owndata()
        if name == "aligned":
            return x._aligned()
        if name in ("c_contiguous", "f_contiguous"):
            return x._layout(f".flags.{name}", lambda a: bool(getattr(a.flags, name)))
        c, f = self._get("c_contiguous"), self._get("f_contiguous")
        behaved = self._get("aligned") and self._get("writeable")
        return {"behaved": behaved, "carray": behaved and c, "farray": behaved and f and not c,
                "fnc": f and not c, "forc": f or c, "contiguous": c, "fortran": f}[name]

    def __getattr__(self, name: str):
        if name in _FLAG_BITS or name in ("behaved", "carray", "farray", "fnc", "forc",
                                          "contiguous", "fortran"):
            return self._get(name)
        if name == "num":
            return sum(bit for n, bit in _FLAG_BITS.items() if self._get(n))
        raise AttributeError(f"'numpy.flagsobj' object has no attribute '{name}'")

    def __getitem__(self, key: str) -> bool:
        name = _FLAG_KEYS.get(key)
        if name is None:
            raise KeyError("Unknown flag")
        return self._get(name)

    def __setattr__(self, name: str, value):
        if name == "writeable":
            self._x.setflags(write=value)
        elif name == "aligned":
            self._x.setflags(align=value)
        elif name == "writebackifcopy":
            self._x.setflags(uic=value)
        else:
            raise AttributeError(f"attribute '{name}' of 'numpy.flagsobj' objects is not writable")

    def __setitem__(self, key: str, value):
        name = _FLAG_KEYS.get(key)
        if name not in ("writeable", "aligned", "writebackifcopy"):
            raise KeyError("Unknown flag")
        setattr(self, name, value)

    def __eq__(self, other):
        if isinstance(other, _Flags):
            return all(self._get(n) == other._get(n) for n in _FLAG_BITS)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "".join(f"  {n.upper()} : {self._get(n)}\n" for n in (
            "c_contiguous", "f_contiguous", "owndata", "writeable", "aligned",
            "writebackifcopy"))[:-1]


TracedArray.reshape = _reshape  # type: ignore[attr-defined]
TracedArray.transpose = _transpose  # type: ignore[attr-defined]
TracedArray.astype = _astype  # type: ignore[attr-defined]
TracedArray.copy = _copy  # type: ignore[attr-defined]
TracedArray.flatten = _flatten  # type: ignore[attr-defined]
TracedArray.fill = _fill  # type: ignore[attr-defined]
TracedArray.view = _view  # type: ignore[attr-defined]
TracedArray.sort = _sort  # type: ignore[attr-defined]
TracedArray.partition = _partition  # type: ignore[attr-defined]
TracedArray.argpartition = _method(np.argpartition)  # type: ignore[attr-defined]
TracedArray.choose = _method(np.choose)  # type: ignore[attr-defined]
TracedArray.compress = _compress  # type: ignore[attr-defined]
TracedArray.put = _put  # type: ignore[attr-defined]
TracedArray.byteswap = _byteswap  # type: ignore[attr-defined]
TracedArray.getfield = _getfield  # type: ignore[attr-defined]
TracedArray.resize = _resize  # type: ignore[attr-defined]
TracedArray.setfield = _eager_method("setfield", inplace=True)  # type: ignore[attr-defined]
for _name in ("tobytes", "tofile", "dump", "dumps"):
    setattr(TracedArray, _name, _eager_method(_name))


def eager_view(tracer, result: np.ndarray, handed=(), memory=None) -> "TracedArray | None":
    """The traced array an eager piece's result stands for when it is (a view
    of) a traced array's memory, as numpy's result is: the operand itself
    (`np.real(x) is x`), or a view of the storage whose concrete array it lies
    in (`np.rot90(x)`), so writes through either reach the other. None for
    memory of its own; a view capture cannot express runs the call eagerly.
    `handed`: the (concrete operand, traced operand) pairs the piece got;
    `memory`: (storage, its concrete array) pairs, by default every live
    storage's concrete value at the graph break."""
    for arr, t in handed:
        if result is arr:
            return t
    if result.size == 0:
        return None
    if memory is None:
        storages = {id(t._st): t._st for t in tracer.live.alive()}
        for t in tracer.source_arrays.values():
            storages.setdefault(id(t._st), t._st)
        memory = [(st, st.concrete) for st in storages.values()]
    for st, c in memory:
        if c is None or not np.may_share_memory(result, c):
            continue
        if st.dtype.kind == "c":  # (complex: numpy routines make copies, not views)
            _cannot_capture("an eager piece returned a view of a traced complex array")
        steps = _match_view(c, result)
        if steps is None:
            _cannot_capture("an eager piece returned a view of a traced array in a layout "
                            "capture does not model")
        v = TracedArray(tracer, st, ())
        for step in steps:
            v = tracer.view(v, step)
        if not result.flags.writeable:
            v._readonly = True
        return v
    return None


def _match_view(c: np.ndarray, r: np.ndarray):
    """View steps that make `r` (same memory, shape and strides) from `c`, or
    None: r must take each of its dims of size > 1 along one dim of c with a
    whole-element step (a slice, a transpose, size-1 dims added or dropped)."""
    if r.dtype != c.dtype or c.ndim == 0:
        return None
    if r.size == c.size and _same_view(_reshaped(c, r.shape), r):
        return [ReshapeStep(r.shape, c.shape)]  # a reshape of the whole array
    item = c.itemsize
    cs = [s // item for s in c.strides]
    if any(s % item for s in c.strides + r.strides):
        return None
    used = [k for k in range(c.ndim) if c.shape[k] > 1]
    if any(cs[k] == 0 for k in used) or len({abs(cs[k]) for k in used}) != len(used):
        return None
    off, rem = divmod(r.__array_interface__["data"][0] - c.__array_interface__["data"][0], item)
    # r's first element as an index of c: each dim's stride exceeds the
    # extent of the dims with smaller strides (c does not overlap itself)
    start = [0] * c.ndim
    order = sorted(used, key=lambda k: -abs(cs[k]))
    for j, k in enumerate(order):
        rest = order[j + 1:]
        lo = sum(min(0, (c.shape[q] - 1) * cs[q]) for q in rest)
        hi = sum(max(0, (c.shape[q] - 1) * cs[q]) for q in rest)
        # the one s_k leaving a remainder the dims of smaller strides can reach
        s_k = (off - lo) // cs[k] if cs[k] > 0 else -((off - lo) // -cs[k])
        if not (0 <= s_k < c.shape[k] and lo <= off - s_k * cs[k] <= hi):
            return None
        start[k], off = s_k, off - s_k * cs[k]
    if off != 0:
        return None
    step = [1] * c.ndim
    size = [1] * c.ndim
    dims = []  # the dim of c each dim of r of size > 1 runs along
    for d in range(r.ndim):
        if r.shape[d] == 1:
            continue
        rs = r.strides[d] // item
        hit = [k for k in used if rs % cs[k] == 0 and k not in dims
               and 0 <= start[k] + (r.shape[d] - 1) * (rs // cs[k]) < c.shape[k]]
        if len(hit) != 1 or rs == 0:
            return None
        k = hit[0]
        dims.append(k)
        step[k], size[k] = rs // cs[k], r.shape[d]
    from .views import SliceStep, TransposeStep

    steps: list = [SliceStep(tuple(start), tuple(step), tuple(size))]
    perm = tuple(dims + [k for k in range(c.ndim) if k not in dims])
    if perm != tuple(range(c.ndim)):
        steps.append(TransposeStep(perm))
    moved = tuple(size[k] for k in perm)
    if moved != r.shape:
        steps.append(ReshapeStep(r.shape, moved))
    return steps if _same_view(np_apply_all(steps, c), r) else None


def _reshaped(c: np.ndarray, shape) -> np.ndarray | None:
    v = c.view()
    try:
        v.shape = shape
    except AttributeError:
        return None
    return v


def _same_view(a: np.ndarray | None, b: np.ndarray) -> bool:
    """a and b are the same elements of the same memory (the strides of
    size-1 dims do not matter)."""
    return (a is not None and a.shape == b.shape
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and all(n == 1 or s == t for n, s, t in zip(a.shape, a.strides, b.strides)))


def is_traced(x: Any) -> bool:
    return isinstance(x, TracedArray)
