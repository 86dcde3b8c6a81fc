"""numpy's array constructors while a function is traced.

`np.asarray`, `np.array`, `np.zeros`, `np.arange`, ... are C functions (or
Python functions that never dispatch on their non-array arguments): left
alone, an array the function makes itself would be a real ndarray, and
writing a traced value into it (`out[i] = x[i] * 2`) would convert that value
to numpy: a graph break per write, and no gradient through it. So while a
function is traced, these names in the `numpy` module point at thin wrappers:

- a traced operand (`np.asarray(x)`, `np.array([x[0], 1.0])`, `np.full(3, s)`)
  goes to the capture rules;
- an array made from non-traced arguments is a traced value from birth: a
  constant of the graph with a storage of its own, so writes into it are
  functionalized like writes into the inputs and differentiable. `np.empty`
  is zeros (its contents are numpy's to choose). `np.array(a)` of a caller's
  or global array `a` is a traced copy of it (read at call time).

A value computed from constants alone is folded where Python needs it
concrete (`int(n)`, `range(len(...))`, a boolean mask or a shape given as an
array, a numpy call with no rule): the reference interpreter evaluates the
ops that make it, and there is no graph break. Only values that depend on the
inputs break the graph.

Which tracer is current is per thread (a stack: a compiled function called on
concrete values inside a trace traces itself). Calls from other threads, from
numpy itself, from this package and from installed libraries get numpy's real
arrays. A name bound before tracing (`from numpy import zeros`) still reaches
numpy's own function: writing a traced value into such an array is a graph
break, and inside `lowering.grad` an error (`NotDifferentiable`)."""

from __future__ import annotations

import contextlib
import dis
import sys
import sysconfig
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.ir import BlockArgument, OpResult, SSAValue

from dialects import array as A

from .. import pytree
from . import registry
from dialects.dtypes import kind as dtype_kind, supported
from .tracer import _INTERNAL, _USER_FILES, MUTATING
from dialects.symbols import SymDim, to_internal

_CONVERSIONS = ("asarray", "array", "asanyarray", "ascontiguousarray")
_FILLS = ("zeros", "empty", "ones", "full", "zeros_like", "ones_like", "empty_like", "full_like")
_EAGER = ("eye", "identity", "arange", "linspace", "logspace", "geomspace", "tri")
_NAMES = _CONVERSIONS + _FILLS + _EAGER
_ORIGINAL: dict[str, Callable] = {n: getattr(np, n) for n in _NAMES}

_lock = threading.Lock()
_depth = 0
_local = threading.local()  # .stack: the tracers of this thread's open traces


def current_tracer():
    """The innermost tracer of this thread's open traces, or None."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


# ---- whose call is it ------------------------------------------------------------------

_LIBRARY = tuple(sorted({p + ("" if p.endswith(("/", "\\")) else "/") for p in (
    sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib"))
    if p})) + _INTERNAL
_user_files: dict[str, bool] = {}


def called_from_user(depth: int = 2) -> bool:
    """The wrapper's (the property's) caller is the user's program, not
    numpy, this package, the standard library or an installed library (those
    get real arrays, and a shape's sizes as ints)."""
    name = sys._getframe(depth).f_code.co_filename
    user = _user_files.get(name)
    if user is None:
        user = name in _USER_FILES or not (name.startswith(_LIBRARY) or name.startswith("<frozen")
                                           or name.startswith("<__array_function__"))
        _user_files[name] = user
    return user


def _traced_in(x, depth: int = 0):
    from .traced import TracedArray

    if isinstance(x, TracedArray):
        return x._t
    if depth < 3 and isinstance(x, (list, tuple)):
        for e in x:
            t = _traced_in(e, depth + 1)
            if t is not None:
                return t
    return None


def _tracer_among(args: tuple, kwargs: dict):
    for x in (*args, *kwargs.values()):
        t = _traced_in(x)
        if t is not None:
            return t
    return None


def _plain(x, depth: int = 0) -> bool:
    """Python/numpy scalars and (nested) lists/tuples of them."""
    if isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating)):
        return True
    if depth < 32 and isinstance(x, (list, tuple)):
        return all(_plain(e, depth + 1) for e in x)
    return False


# ---- constants born traced ---------------------------------------------------------------

def _new(tr, value: SSAValue, like: np.ndarray):
    """A traced array with a storage of its own holding `value`, laid out as
    numpy laid out `like` (order="F" makes reshapes copies, as in numpy)."""
    t = tr.wrap(value)
    if like.ndim and like.size:
        t._st.strides = like.strides
    return t


def lift_constant(tr, arr: Any) -> Any:
    """An array numpy made (from constants) as a traced value; a tuple or list
    of them element by element; anything else (numpy scalars, arrays of dtypes
    the compiler does not take) unchanged."""
    if type(arr) is np.ndarray:
        if not supported(arr.dtype):
            return arr
        return _new(tr, tr.prims.dense(arr), arr)
    if isinstance(arr, tuple):
        return tuple(lift_constant(tr, a) for a in arr)
    if isinstance(arr, list):
        return [lift_constant(tr, a) for a in arr]
    return arr


def _fill_constant(tr, proto: np.ndarray, value, shape=None):
    """`proto`'s shape (or `shape`, symbolic sizes of it), dtype and layout,
    every element `value` (a scalar of proto's dtype, converted the way numpy
    converted it)."""
    p = tr.prims
    c = p.constant(value, proto.dtype)
    if shape is None:
        return _new(tr, p.broadcast(c, proto.shape) if proto.shape else c, proto)
    t = tr.wrap(p.broadcast(c, shape))
    if proto.ndim and proto.size:
        from .tracer import c_strides

        f_order = proto.flags.f_contiguous and not proto.flags.c_contiguous
        t._st.strides = (c_strides(shape[::-1], proto.itemsize)[::-1] if f_order
                         else c_strides(shape, proto.itemsize))
    return t


def _scalar_of(fill_value, dtype: np.dtype):
    """fill_value converted as numpy's full/full_like convert it (copyto with
    casting="unsafe": numpy's values, warnings and errors)."""
    return _ORIGINAL["full"]((), fill_value, dtype=dtype)[()]


def _make_fill(name: str) -> Callable:
    """zeros/empty/ones/full(shape, ...) and their *_like of non-traced
    arguments: numpy allocates a prototype (never filled, so it costs no
    memory traffic) for its shape, dtype, layout and errors."""
    like = name.endswith("_like")
    proto_fn = _ORIGINAL["empty_like" if like else "empty"]
    full = name.startswith("full")

    def build(tr, args, kwargs):
        args, kwargs = list(args), dict(kwargs)
        fill = 0 if name.startswith(("zeros", "empty")) else 1
        if full:
            if len(args) > 1:
                fill = args.pop(1)
            elif "fill_value" in kwargs:
                fill = kwargs.pop("fill_value")
            else:
                return None  # numpy's own error
            if not like:  # numpy's full: dtype=None is the fill value's dtype
                if len(args) > 1:
                    if args[1] is None:
                        args[1] = _ORIGINAL["asarray"](fill).dtype
                elif kwargs.get("dtype") is None:
                    kwargs["dtype"] = _ORIGINAL["asarray"](fill).dtype
        # a shape of symbolic sizes: numpy's prototype is made for their values,
        # the traced array keeps the sizes
        sym = None
        if not like:
            given = args[0] if args else kwargs.get("shape")
            dims = given if isinstance(given, (tuple, list)) else (given,)
            if any(isinstance(d, SymDim) for d in dims):
                sym = tuple(dims)
                plain = tuple(int.__int__(d) if isinstance(d, SymDim) else d for d in dims)
                if args:
                    args[0] = plain
                else:
                    kwargs["shape"] = plain
        proto = proto_fn(*args, **kwargs)
        if type(proto) is not np.ndarray or not supported(proto.dtype):
            return None
        if np.ndim(fill) != 0:  # an array fill value: numpy broadcasts it in
            if sym is not None:
                return None  # (numpy's own, specialized: an array fill of symbolic shape)
            np.copyto(proto, fill, casting="unsafe")
            return _new(tr, tr.prims.dense(proto), proto)
        return _fill_constant(tr, proto, _scalar_of(fill, proto.dtype), sym)

    return build


def _make_conversion(name: str) -> Callable:
    def build(tr, args, kwargs):
        a = args[0] if args else kwargs.get("object")
        if isinstance(a, np.ndarray):
            if name == "array" and _is_source(tr, a):  # a copy of a caller's/global array
                return registry.call_function(tr, _ORIGINAL[name], (tr.lift(a), *args[1:]),
                                              kwargs)
            return None
        if not _plain(a):
            return None
        return lift_constant(tr, _ORIGINAL[name](*args, **kwargs))

    return build


def _make_eager(name: str) -> Callable:
    def build(tr, args, kwargs):
        return lift_constant(tr, _ORIGINAL[name](*args, **kwargs))

    return build


def _is_source(tr, a) -> bool:
    i = tr.source_ids.get(id(a))
    return i is not None and tr.sources[i] is a


def _wrapper(name: str, build: Callable) -> Callable:
    original = _ORIGINAL[name]

    def make(*args, **kwargs):
        args, kwargs = to_internal(args), to_internal(kwargs)
        t = _tracer_among(args, kwargs)
        if t is not None:
            if original not in registry.FUNCTIONS:
                return original(*args, **kwargs)  # numpy's own dispatch
            if _traced_in(kwargs.get("like")) is not None:  # numpy drops like= when it dispatches
                kwargs = {k: v for k, v in kwargs.items() if k != "like"}
            return registry.call_function(t, original, args, kwargs)
        tr = current_tracer()
        if tr is None or not called_from_user():
            return original(*args, **kwargs)
        like = kwargs.get("like")
        if like is not None and type(like) is not np.ndarray:
            return original(*args, **kwargs)  # another array library's constructor
        r = build(tr, args, kwargs)
        return original(*args, **kwargs) if r is None else r

    make.__name__ = make.__qualname__ = name
    make.__doc__ = original.__doc__
    make.__wrapped__ = original  # type: ignore[attr-defined]
    return make


_WRAPPERS = {n: _wrapper(n, _make_conversion(n)) for n in _CONVERSIONS}
_WRAPPERS.update({n: _wrapper(n, _make_fill(n)) for n in _FILLS})
_WRAPPERS.update({n: _wrapper(n, _make_eager(n)) for n in _EAGER})


@contextlib.contextmanager
def constructors_capture(tracer=None):
    """numpy's constructors capture (see the module docstring) while the
    block runs; `tracer` is the trace that arrays made from constants join
    (this thread's only)."""
    global _depth
    registry._load_rules()  # rules register under numpy's own functions: load them unpatched
    stack = _local.__dict__.setdefault("stack", [])
    if tracer is not None:
        stack.append(tracer)
    with _lock:
        if _depth == 0:
            for n, w in _WRAPPERS.items():
                setattr(np, n, w)
        _depth += 1
    try:
        yield
    except BaseException:
        if tracer is not None:
            _lost.pop(tracer, None)
        raise
    else:
        lost = _lost.pop(tracer, None) if tracer is not None else None
        if lost is not None:
            from passes.autograd import NotDifferentiable

            raise NotDifferentiable(lost)
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for n, f in _ORIGINAL.items():
                    setattr(np, n, f)
        if tracer is not None:
            stack.pop()


# ---- folding values made from constants alone ----------------------------------------

class _Folder:
    """Trace-time values of SSA values that depend on no graph input: each
    op evaluated by the numpy reference backend (the oracle every backend is
    checked against), memoized. With `specialize` ("value" or "index"), the
    arguments the tracer may specialize for that use count as constants
    too, of the call's values; those a value was computed from are recorded
    in the trace (`Trace.specialized`) and guarded."""

    def __init__(self, tracer, specialize: str | None = None):
        self.tracer = weakref.ref(tracer)
        self.specialize = specialize
        self.const: dict[SSAValue, bool] = {}
        self.values: dict[SSAValue, np.ndarray] = {}

    def _specialized(self, v: SSAValue) -> int | None:
        """The source index of argument v where it may be specialized."""
        if self.specialize is None or not isinstance(v, BlockArgument):
            return None
        tr = self.tracer()
        i = None if tr is None else tr.arg_sources.get(v)
        return i if i is not None and tr.may_specialize(i, self.specialize) else None

    def _source(self, v: SSAValue) -> SSAValue | None:
        """What v stands for: itself, or for a graph-break argument the value
        of the closed graph it carries (unless eager code wrote to it)."""
        if isinstance(v, BlockArgument):
            tr = self.tracer()
            return None if tr is None else tr.links.get(v)
        return v

    def is_constant(self, v: SSAValue) -> bool:
        from ..backends.numpy_backend import RULES

        stack = [v]
        while stack:
            u = stack[-1]
            if u in self.const:
                stack.pop()
                continue
            if self._specialized(u) is not None:
                self.const[u] = True
                stack.pop()
                continue
            s = self._source(u)
            if s is None:
                self.const[u] = False
                stack.pop()
                continue
            if s is not u:
                if s in self.const:
                    self.const[u] = self.const[s]
                    stack.pop()
                else:
                    stack.append(s)
                continue
            op = u.op if isinstance(u, OpResult) else None
            if op is None or type(op) not in RULES or (
                    not op.operands and not isinstance(op, (A.ConstantOp, A.IotaOp))):
                self.const[u] = False
                stack.pop()
                continue
            todo = [w for w in op.operands if w not in self.const]
            if todo:
                stack.extend(todo)
                continue
            ok = all(self.const[w] for w in op.operands)
            for r in op.results:
                self.const[r] = ok
            stack.pop()
        return self.const[v]

    def value(self, v: SSAValue) -> np.ndarray | None:
        """v's value, or None where it depends on a graph input."""
        if not self.is_constant(v):
            return None
        from ..backends.numpy_backend import RULES

        stack = [v]
        while stack:
            u = stack[-1]
            if u in self.values:
                stack.pop()
                continue
            i = self._specialized(u)
            if i is not None:
                tr = self.tracer()
                x = np.array(tr.source_value(i))
                x.flags.writeable = False
                tr.trace.specialized[i] = tr.sources[i] if type(tr.sources[i]) is float else x
                self.values[u] = x
                stack.pop()
                continue
            s = self._source(u)
            if s is not u:
                if s in self.values:
                    self.values[u] = self.values[s]
                    stack.pop()
                else:
                    stack.append(s)
                continue
            op = u.op
            todo = [w for w in op.operands if w not in self.values]
            if todo:
                stack.extend(todo)
                continue
            with np.errstate(all="ignore"):
                r = RULES[type(op)](op)(*[self.values[w] for w in op.operands])
            rs = r if len(op.results) > 1 else (r,)
            for res, x in zip(op.results, rs):
                x = np.asarray(x)
                x.flags.writeable = False
                self.values[res] = x
            stack.pop()
        return self.values[v]


_folders: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _folder(tracer, specialize: str | None = None) -> _Folder:
    fs = _folders.get(tracer)
    if fs is None:
        fs = _folders[tracer] = {}
    f = fs.get(specialize)
    if f is None:
        f = fs[specialize] = _Folder(tracer, specialize)
    return f


def constant_value(t) -> np.ndarray | None:
    """The value of traced array `t` when it is made from constants alone (a
    read-only array), else None."""
    return _folder(t._t).value(t._v())


def fold_needed(tracer, needed: list, specialize: str | None = None) -> list[np.ndarray] | None:
    """Concrete values of `needed` without running the graph, when all of them
    are made from constants alone — or from arguments Python may specialize
    for this use (`specialize`, see `Tracer.may_specialize`) — (the caller
    may keep and write them)."""
    if tracer.grad_regions:  # (a value is a variable there, never specialized)
        specialize = None
    f = _folder(tracer, specialize)
    if not all(f.is_constant(t._v()) for t in needed):
        return None
    return [np.array(f.value(t._v())) for t in needed]


NOT_FOLDED = object()


def _lift_folded(tracer, result, handed, memory):
    from .traced import eager_view

    if type(result) is np.ndarray and supported(result.dtype):
        view = eager_view(tracer, result, handed, memory)
        return view if view is not None else lift_constant(tracer, result)
    if isinstance(result, tuple):
        return tuple(_lift_folded(tracer, r, handed, memory) for r in result)
    if isinstance(result, list):
        return [_lift_folded(tracer, r, handed, memory) for r in result]
    return lift_constant(tracer, result)


def fold_call(tracer, fn: Callable, args: tuple, kwargs: dict, mutates=None) -> Any:
    """A numpy call that capture cannot take as it stands (no rule, a static
    argument given as an array, a boolean mask), tried before it breaks the
    graph: with every traced operand made from constants it runs on their
    values (what it writes is written to their storages, its results are
    constants); with some, those are handed over as numpy arrays and the call
    is captured again. NOT_FOLDED otherwise."""
    from .traced import TracedArray

    leaves, tdef = pytree.flatten((args, kwargs))
    traced = [i for i, x in enumerate(leaves) if isinstance(x, TracedArray)]
    if not traced:
        return NOT_FOLDED
    f = _folder(tracer)
    storages: dict[int, Any] = {}
    for i in traced:
        st = leaves[i]._st
        if id(st) not in storages:
            storages[id(st)] = (st, f.value(st.value))
    if all(base is not None for _, base in storages.values()):
        copies = {}
        for k, (st, base) in storages.items():
            c = np.array(base)
            c.flags.writeable = not st.readonly
            copies[k] = c
        from .views import np_apply_all

        new = list(leaves)
        for i in traced:
            x = leaves[i]
            new[i] = np_apply_all(x._steps, copies[id(x._st)])
        a, k = pytree.unflatten(tdef, new)
        result = fn(*a, **k)
        outs, _ = pytree.flatten(result)
        if any(isinstance(r, np.ndarray) and np.may_share_memory(r, c)
               for r in outs for c in copies.values()):
            return NOT_FOLDED  # a view of an operand (np.rot90(a)): the eager path keeps views
        for key, (st, base) in storages.items():
            c = copies[key]
            if c.tobytes() != np.asarray(base).tobytes():  # the call wrote into it
                tracer.write(TracedArray(tracer, st, ()), tracer.prims.dense(c))
        # a result in an operand's memory stays that operand's view, as numpy's
        memory = [(st, copies[key]) for key, (st, _) in storages.items()]
        return _lift_folded(tracer, result, [(new[i], leaves[i]) for i in traced], memory)
    # the arrays the call writes stay traced
    written = {id(mutates)} if mutates is not None else set()
    if fn in MUTATING and args and isinstance(args[0], TracedArray):
        written.add(id(args[0]))
    out_leaves, _ = pytree.flatten(kwargs.get("out"))
    written.update(id(o) for o in out_leaves if isinstance(o, TracedArray))
    new = list(leaves)
    changed = False
    for i in traced:
        x = leaves[i]
        if id(x) in written:
            continue
        arr = constant_value(x)
        if arr is not None:
            new[i] = np.array(arr)
            changed = True
    if not changed:
        return NOT_FOLDED
    a, k = pytree.unflatten(tdef, new)
    if fn in registry.FUNCTIONS:  # numpy's constructors do not dispatch: capture it ourselves
        return registry.call_function(tracer, fn, a, k)
    return fn(*a, **k)


_STORE_SUBSCR = dis.opmap["STORE_SUBSCR"]


def _user_frame():
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_INTERNAL) and \
            f.f_code.co_filename not in _USER_FILES:
        f = f.f_back
    return f


def leaving_graph(t, element: bool = False) -> None:
    """A traced array converted to a numpy array (`__array__`: written into a
    real ndarray, handed to code that needs one) or, with `element`, to a
    Python float by numpy storing it into a real array (`real[i] = x[i]`: the
    user's line is executing a subscript store, not a call of `float`).
    Inside a differentiated function a floating-point value that depends on
    the inputs cannot leave the graph that way: its gradient would silently be
    lost. (`float(x)` itself is documented to carry no gradient.)"""
    tr = t._t
    if not tr.grad_regions or t.dtype is None or dtype_kind(t.dtype) != "f":
        return
    if element:
        f = _user_frame()
        if f is None or f.f_lasti < 0 or f.f_code.co_code[f.f_lasti] != _STORE_SUBSCR:
            return
    if constant_value(t) is None and tr not in _lost:
        f = _user_frame()
        where = f"{f.f_code.co_filename}:{f.f_lineno}: " if f is not None else ""
        # numpy turns an exception raised here into its own ValueError: the
        # error is raised when the trace ends
        _lost[tr] = (
            f"{where}lowering.grad: a traced array is converted to a numpy array (written into an "
            "array that numpy made, e.g. by a function bound before tracing such as "
            "`from numpy import zeros`, or passed to code that needs a real array); "
            "gradients cannot flow through it — make the array with np.zeros/np.empty/... "
            "inside the function, or do the conversion outside the differentiated function")


_lost: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tracer -> message
