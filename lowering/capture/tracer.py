"""Capture by proxy: `TracedArray` stands for a numpy array while a function is
traced. numpy hands every ufunc and array function called on it to us through
`__array_ufunc__` / `__array_function__`; operators and methods forward to
those; the rules in `capture/rules/` emit tensor-level IR.

Mutation is functionalized while tracing: an array and all of its views share a
`Storage` whose current SSA value is replaced on every write (through
`views.*Step.update`); views re-derive their value when the storage's version
moves. Caller arrays that were written get their final value written back.

A graph break (a Python conversion of a traced value, a function with no rule,
a data-dependent shape) compiles and runs the graph recorded so far, hands the
concrete values to Python, and resumes tracing with them as inputs of a new
graph: the lazy-tensor way of resuming without rewriting bytecode."""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dialects.symbols import SymDim, broadcast_shapes
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, ModuleOp, i64
from xdsl.ir import Block, Operation, Region, SSAValue

from .. import pytree
from dialects.dtypes import kind as dtype_kind, representable, supported, tensor_type
from dialects.prims import Prims, dtype_of, shape_of
from dialects.array import WRITES_ATTR
from .views import ReshapeStep, np_apply_all, strided_dummy

_PKG_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_INTERNAL = tuple(
    os.path.join(_PKG_ROOT, d) + os.sep for d in ("lowering", "dialects", "passes", "runtime")
) + (os.path.dirname(np.__file__) + os.sep,)


# user code that ships inside the package (the built-in examples)
_USER_FILES = (os.path.join(_PKG_ROOT, "lowering", "examples.py"),)


def user_location() -> tuple[str, int] | None:
    """The innermost frame outside this project and numpy: the user's line."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if fn in _USER_FILES or (not fn.startswith(_INTERNAL)
                                 and not fn.startswith("<__array_function__")):
            return fn, f.f_lineno
        f = f.f_back
    return None


# numpy functions that write into their first argument
MUTATING = frozenset([np.copyto, np.put, np.place, np.putmask, np.fill_diagonal,
                      np.put_along_axis])


class GraphBreakError(RuntimeError):
    """Raised under `fullgraph=True` where capture would have broken the graph."""

    def __init__(self, reason: str, filename: str | None, lineno: int | None):
        where = f"{filename}:{lineno}" if filename else "<unknown>"
        super().__init__(f"graph break at {where}: {reason}")
        self.reason, self.filename, self.lineno = reason, filename, lineno


class Unsupported(Exception):
    """A rule cannot capture this call; capture turns it into a graph break."""


@dataclass
class BreakInfo:
    reason: str
    filename: str | None
    lineno: int | None

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}: {self.reason}"


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    out, acc = [], itemsize
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


class Storage:
    """One buffer as numpy would have it: the caller's array, or an array
    created inside the function. Views of it share it."""

    __slots__ = ("value", "version", "shape", "dtype", "strides", "source", "mutated",
                 "readonly", "arg", "concrete", "part_of", "__weakref__")

    def __init__(self, value, shape, dtype, strides, source=None, readonly=False):
        self.value: SSAValue = value
        self.version = 0
        self.shape, self.dtype, self.strides = shape, dtype, strides
        self.source: int | None = source
        self.mutated = False
        self.readonly = readonly
        self.arg: SSAValue | None = None  # the graph argument standing for this storage
        self.concrete: Any = None  # its concrete array after a graph break
        # "real"/"imag": a copy standing for that view of a complex array
        # (numpy's view writes through; this one cannot: `_no_write_through`)
        self.part_of: str | None = None


def _no_write_through(t) -> None:
    if t._st.part_of is not None:
        raise NotImplementedError(
            f"a write through .{t._st.part_of} of a complex array (capture holds a copy "
            "of it, not numpy's view)")


@dataclass
class Draw:
    """A random draw made on every call, in program order, feeding the graph:
    `method` of the generator at source `source` (None: numpy's global
    `RandomState`, which the `np.random.*` functions use) with concrete
    arguments. numpy's own generator draws, so with the same seed the values
    and the generator's state after the call are numpy's."""

    source: int | None
    method: str
    args: tuple
    kwargs: dict
    python_float: bool = False  # size=None: numpy returns a Python float

    def moved(self, source: int | None) -> "Draw":
        return Draw(source, self.method, self.args, self.kwargs, self.python_float)

    def generator(self, sources: list):
        return np.random.mtrand._rand if self.source is None else sources[self.source]

    def __call__(self, sources: list) -> np.ndarray:
        r = getattr(self.generator(sources), self.method)(*self.args, **self.kwargs)
        return np.asarray(r, np.float64) if self.python_float else np.asarray(r)


@dataclass
class Segment:
    """One captured graph: a module plus how to bind its arguments (an int is a
    source index, anything else a concrete array carried from Python)."""

    module: ModuleOp
    bindings: list[Any]
    # how a later call finds each argument: the binding itself (a source
    # index, a Draw), ("res", k, j) result j of segment k, ("eager", k, j)
    # array j made by the eager piece after segment k
    refs: list[Any] = field(default_factory=list)
    owners: list[int | None] = field(default_factory=list)


HOLE = object()  # where a needed value goes in an eager piece's arguments


@dataclass
class EagerPiece:
    """The numpy call a graph break ran (`eager_call`), to run again on a
    later call: `fn` on the pytree `tdef` whose traced leaves are the break's
    needed values; `arrays` what its array results looked like, `others` its
    other results (which Python saw, so they must come out equal)."""

    fn: Callable
    tdef: Any
    leaves: list  # HOLE where a needed value goes, else the constant leaf
    arrays: list = field(default_factory=list)  # (shape, dtype, strides) per adopted array
    others: list = field(default_factory=list)  # the non-array leaves of the result
    result_tdef: Any = None


@dataclass
class BreakRecord:
    """What crossed from the graph to Python at a break: `needed` (the
    result of segment k, or a source, with view steps) and the concrete
    values Python got. A later call may skip the Python up to the next
    graph when Python gets the same values (`values`, compared bit for bit),
    or when the break was a numpy call (`eager`), run again on the new
    values."""

    needed: list  # (ref, steps)
    values: list
    eager: EagerPiece | None = None


@dataclass
class OutputPlan:
    """How to rebuild the user's return value and write back mutations from the
    final graph's results."""

    treedef: Any
    leaves: list[tuple]  # ("out", result index, view steps, scalar) | ("const", v) | ("copy", arr)
    writebacks: list[tuple[int, int]]  # (source index, result index)


@dataclass
class Trace:
    segments: list[Segment] = field(default_factory=list)
    breaks: list[BreakInfo] = field(default_factory=list)
    plan: OutputPlan | None = None
    mutates_inputs: bool = False
    # per result of the last graph: the position of the graph input it may be
    # returned as (an unchanged input of its own storage), else None
    owners: list[int | None] = field(default_factory=list)
    records: list[BreakRecord] = field(default_factory=list)  # one per break
    replayable: bool = True  # later calls may run the graphs without the Python
    # source index -> its value, for the arguments Python needed the value of
    # (`Tracer.may_specialize`): the program holds for these values only, and
    # its guards compare them bit for bit
    specialized: dict[int, Any] = field(default_factory=dict)


# an array argument whose contents decide a size or an index (`best[w:]` for
# `w` of `weights`) is specialized up to this many elements: its guard
# compares them all on every call
SPECIALIZE_LIMIT = 4096


class Tracer:
    def __init__(self, sources: list[Any], run_segment: Callable, fullgraph: bool = False,
                 source_ids: dict[int, int] | None = None):
        self.sources = sources
        self.run_segment = run_segment
        self.fullgraph = fullgraph
        self.source_ids = source_ids or {}
        self.trace = Trace()
        self.live = LiveSet()
        self.source_arrays: dict[int, TracedArray] = {}
        self.input_storages: dict[int, Storage] = {}
        # graph-break links: an argument of the current graph -> the value of
        # the closed graph it stands for (for differentiating across breaks)
        self.links: dict[SSAValue, SSAValue] = {}
        self.grad_regions = 0  # open grad/value_and_grad/vjp regions
        # sources from this index on (values walked in Python state) are
        # graph inputs only where a graph reads them
        self.prune_from: int | None = None
        # source index -> its shape with size symbols (`dialects.symbols`),
        # for a function compiled for many shapes
        self.symbolic_shapes: dict[int, tuple] = {}
        # the graph argument standing for a source (in any segment) -> its index
        self.arg_sources: dict[SSAValue, int] = {}
        # arguments never to specialize (their value changed between calls)
        self.unspecialized: frozenset[int] = frozenset()
        self._new_segment()

    # ---- segments ---------------------------------------------------------
    def _new_segment(self) -> None:
        self.block = Block()
        self.prims = Prims(self.block, location=user_location)
        self.bindings: list[Any] = []
        self.refs: list[Any] = []
        self.eager_arrays = 0  # arrays adopted from the current break's eager piece

    def _arg(self, binding: Any, shape, dtype, ref: Any = None) -> SSAValue:
        arg = self.block.insert_arg(tensor_type(tuple(shape), dtype), len(self.block.args))
        self.bindings.append(binding)
        if ref is None:
            if type(binding) is int or isinstance(binding, Draw):
                ref = binding
            else:  # a concrete value of unknown origin: later calls re-trace
                self.trace.replayable = False
        self.refs.append(ref)
        return arg

    def _close(self, outputs: list[SSAValue], writes: dict[int, SSAValue] | None = None
               ) -> Segment:
        if self.prune_from is not None:
            for a in reversed(self.block.args):
                b = self.bindings[a.index]
                if type(b) is int and b >= self.prune_from and not a.uses and a not in outputs:
                    del self.bindings[a.index]
                    del self.refs[a.index]
                    self.block.erase_arg(a)
        self.block.add_op(func.ReturnOp(*outputs))
        ftype = ([a.type for a in self.block.args], [o.type for o in outputs])
        fn = func.FuncOp("main", ftype, Region(self.block))
        # (results the caller's arguments take, `written_arguments`: each
        # argument's index once unused ones are gone)
        writes = {k: a.index for k, a in (writes or {}).items()  # type: ignore[attr-defined]
                  if a in self.block.args}
        if writes:
            fn.res_attrs = ArrayAttr([DictionaryAttr(
                {WRITES_ATTR: IntegerAttr(writes[k], i64)} if k in writes else {})
                for k in range(len(outputs))])
        seg = Segment(ModuleOp([fn]), self.bindings, self.refs)
        self.trace.segments.append(seg)
        return seg

    def _concrete_inputs(self, seg: Segment) -> list[np.ndarray]:
        return [self.source_value(b) if type(b) is int else b(self.sources)
                if isinstance(b, Draw) else b for b in seg.bindings]

    def source_value(self, i: int) -> np.ndarray:
        v = self.sources[i]
        if isinstance(v, np.ndarray):
            return v
        return np.asarray(v, dtype=np.float64) if isinstance(v, float) else np.asarray(v)

    def _run(self, storages: list[Storage], extra: list[SSAValue], last: bool = False):
        writes = self.written_arguments(storages) if last else {}
        seg = self._close([st.value for st in storages] + extra, writes)
        inputs = self._concrete_inputs(seg)
        # a result may be its storage's argument itself: unchanged, or (the
        # last graph) written in place by the program
        pos = [st.arg.index if (st.value is st.arg or i in writes) and st.arg in self.block.args
               else None for i, st in enumerate(storages)]
        self.trace.owners = seg.owners = pos + [None] * len(extra)
        results = self.run_segment(seg.module, inputs)
        owners = [None if i is None else inputs[i] for i in self.trace.owners]
        return inputs, fresh_results(results, inputs, owners)

    def written_arguments(self, storages: list[Storage]) -> dict[int, SSAValue]:
        """Result position -> graph argument, for the caller's arrays the
        last graph writes (`x *= y`, `x[1:] = ...`) that are this graph's
        arguments as they came (bound to their source): the program may
        compute such a result in the argument's own buffer (lower-to-loop's
        `in_place_results`) instead of a buffer copied into it afterwards.
        (An earlier graph's writes stay in buffers of their own: a later
        graph, or the eager piece between, may still fail, and an eager
        re-run needs the caller's arrays as they came.)"""
        out = {}
        inputs = [(b, self.sources[b]) for b in self.bindings
                  if type(b) is int and isinstance(self.sources[b], np.ndarray)]
        for k, st in enumerate(storages):
            if (st.mutated and st.source is not None and st.arg is not None
                    and st.value is not st.arg and st.arg in self.block.args
                    and type(self.bindings[st.arg.index]) is int
                    and self.bindings[st.arg.index] == st.source
                    and isinstance(self.sources[st.source], np.ndarray)
                    and st.value not in self.block.args
                    # (not where this call's arrays overlap it: the program runs
                    # on them once, as traced, before its guard keeps such calls out)
                    and not any(b != st.source and np.may_share_memory(x, self.sources[st.source])
                                for b, x in inputs)):
                out[k] = st.arg
        return out

    # ---- sources ----------------------------------------------------------
    def wrap_source(self, i: int) -> "TracedArray":
        """The traced stand-in for source i (one per source, so aliasing args
        share one storage)."""
        t = self.source_arrays.get(i)
        if t is not None:
            return t
        v = self.sources[i]
        weak = None
        if isinstance(v, np.ndarray):
            shape, dtype, strides, ro = v.shape, v.dtype, v.strides, not v.flags.writeable
        elif isinstance(v, np.generic):
            shape, dtype, strides, ro = (), v.dtype, (), True
        elif isinstance(v, float):
            shape, dtype, strides, ro, weak = (), np.dtype(np.float64), (), True, float
        else:
            raise TypeError(f"cannot trace a {type(v).__name__}")
        if not representable(dtype):  # (complex inputs: for numpy routines only)
            raise Unsupported(f"input dtype {dtype} is not supported")
        sym = self.symbolic_shapes.get(i)
        if sym is not None:  # (C or F layout: the strides follow from the sizes)
            shape = sym
            strides = c_strides(sym, dtype.itemsize)
            if not v.flags.c_contiguous:
                strides = c_strides(sym[::-1], dtype.itemsize)[::-1]
        st = Storage(self._arg(i, shape, dtype), shape, dtype, strides, source=i, readonly=ro)
        st.arg = st.value
        self.arg_sources[st.arg] = i
        self.input_storages[i] = st
        t = TracedArray(self, st, (), weak=weak, scalar=isinstance(v, (np.generic, float)))
        self.source_arrays[i] = t
        return t

    def draw_input(self, d: "Draw", shape, dtype, weak=None, scalar=False) -> "TracedArray":
        """The graph input a random draw makes on every call."""
        st = Storage(self._arg(d, shape, dtype), shape, dtype, c_strides(shape, dtype.itemsize))
        st.arg = st.value
        return TracedArray(self, st, (), weak=weak, scalar=scalar)

    def lift(self, x: Any) -> "TracedArray":
        """Any array-like operand as a TracedArray: caller/global arrays by
        source (read at call time), other arrays and scalars as constants."""
        if isinstance(x, TracedArray):
            if x._t is not self:
                raise RuntimeError("a traced value escaped its trace (stored across calls?)")
            return x
        if isinstance(x, np.ndarray):
            i = self.source_ids.get(id(x))
            if i is not None and self.sources[i] is x:
                return self.wrap_source(i)
            if not supported(x.dtype):
                raise Unsupported(f"array of dtype {x.dtype} is not supported")
            return self.wrap(self.prims.dense(x))
        if isinstance(x, np.generic):  # before float: np.float64 subclasses float
            if not supported(x.dtype):
                raise Unsupported(f"scalar of dtype {x.dtype} is not supported")
            return self.wrap(self.prims.constant(x, x.dtype), scalar=True)
        if isinstance(x, (bool, int, float)):
            dt = (np.dtype(np.bool_) if isinstance(x, bool)
                  else np.result_type(int.__int__(x) if isinstance(x, SymDim) else x))
            try:
                v = self.prims.constant(x, dt)
            except OverflowError:
                v = self.prims.constant(x, np.dtype(np.float64))
            # (a size's value is a Python int)
            return self.wrap(v, weak=int if isinstance(x, SymDim) else type(x), scalar=True)
        if isinstance(x, np.generic):
            if not supported(x.dtype):
                raise Unsupported(f"scalar of dtype {x.dtype} is not supported")
            return self.wrap(self.prims.constant(x, x.dtype), scalar=True)
        if isinstance(x, (list, tuple)):
            if _holds_traced(x):  # one array of them (np.asarray), not a break per element
                return self.lift_nested(x)
            arr = np.asarray(x)
            if arr.dtype == object:
                return self.lift_nested(x)
            return self.lift(arr)
        raise Unsupported(f"cannot use a {type(x).__name__} as an array")

    def lift_nested(self, x) -> "TracedArray":
        """np.array([...]) of a nested list that holds traced values."""
        if isinstance(x, (list, tuple)):
            parts = [self.lift_nested(e) for e in x]
            if not parts:
                raise Unsupported("empty nested sequence")
            dt = np.result_type(*[p._promo() for p in parts])
            shape = broadcast_shapes(*[p.shape for p in parts])
            vals = [self.prims.reshape(self.prims.broadcast(self.prims.cast(p._v(), dt), shape), (1, *shape)) for p in parts]
            if any(p.shape != shape for p in parts):
                raise ValueError("setting an array element with a sequence: inhomogeneous shape")
            return self.wrap(self.prims.concat(vals, 0))
        t = self.lift(x)
        return t

    # ---- values -------------------------------------------------------------
    def wrap(self, v: SSAValue, weak=None, scalar=False, readonly=False) -> "TracedArray":
        shape, dtype = shape_of(v), dtype_of(v)
        st = Storage(v, shape, dtype, c_strides(shape, dtype.itemsize), readonly=readonly)
        return TracedArray(self, st, (), weak=weak, scalar=scalar)

    def view(self, base: "TracedArray", step) -> "TracedArray":
        if (base._weak is not None and not base._steps) or base._scalar:
            # a Python or numpy scalar: numpy makes a fresh array of it first
            # (`np.transpose(0.5, ())` is a writeable 0-d array, unrelated to
            # the argument; `np.abs(a0d).reshape(-1)` a new array, not a view
            # of the scalar), so its views are neither read-only nor aliases
            base = self.wrap(base._v())
        v = step.apply(self.prims, base._v())
        t = TracedArray(self, base._st, base._steps + (step,))
        t._cache = (base._st.version, v)
        t._readonly = base._readonly or step.readonly
        return t

    def reshape_is_view(self, t: "TracedArray", shape: tuple[int, ...]) -> bool:
        """numpy returns a view from reshape exactly when the layout allows it;
        ask numpy, on a layout-only dummy."""
        st = t._st
        dummy = np_apply_all(t._steps, strided_dummy(st.shape, st.strides, st.dtype))
        try:
            dummy.reshape(shape, copy=False)
            return True
        except (ValueError, AttributeError):
            return False

    def reshape(self, t: "TracedArray", shape: tuple[int, ...]) -> "TracedArray":
        if self.reshape_is_view(t, shape):
            return self.view(t, ReshapeStep(tuple(shape), t.shape))
        return self.wrap(self.prims.reshape(t._v(), shape))

    def write(self, t: "TracedArray", new: SSAValue) -> None:
        """Functionalized `t[...] = new` (new has t's shape and dtype)."""
        if t._readonly:
            raise ValueError("assignment destination is read-only")
        _no_write_through(t)
        st = t._st
        bases = [st.value]
        for step in t._steps[:-1]:
            bases.append(step.apply(self.prims, bases[-1]))
        cur = new
        for step, base in zip(reversed(t._steps), reversed(bases)):
            cur = step.update(self.prims, base, cur)
        st.value = cur
        st.version += 1
        st.mutated = True
        t._cache = (st.version, new)

    # ---- graph breaks ---------------------------------------------------
    def may_specialize(self, i: int, use: str) -> bool:
        """Whether Python may have the value of source i (the program then
        holds for that value only, guarded): an argument (not Python state)
        that is a Python float — a hyperparameter: `math.sqrt(dt)`, `if lr >
        0.1` — or, where the value decides a size or an index (`use` "index":
        `best[w:]`, `int(n[0])`), a small array; never one whose value changed
        between calls (`unspecialized`: those break the graph), nor inside a
        differentiated function (the value is a variable there)."""
        if (self.prune_from is None or i >= self.prune_from or i in self.unspecialized
                or self.grad_regions or i in self.symbolic_shapes):
            return False
        v = self.sources[i]
        if type(v) is float:
            return True
        return (use == "index" and type(v) is np.ndarray and v.size <= SPECIALIZE_LIMIT
                and dtype_kind(v.dtype) in "biuf")

    def graph_break(self, reason: str, needed: list["TracedArray"],
                    private: "TracedArray | None" = None, force: bool = False,
                    specialize: str | None = None) -> list[np.ndarray]:
        """Run what was captured so far and return concrete values of `needed`.
        `private`: an array the eager code will write into; if its memory is
        the caller's, it gets a copy (the caller's arrays are written only when
        the whole call has succeeded). `specialize` ("value" or "index"):
        Python converts the values (`float(x)`, `best[w:]`); where they are
        made from constants and arguments it may specialize
        (`may_specialize`), they are computed and the arguments guarded
        instead of breaking the graph."""
        # values made from constants alone need no break (`force`: the break
        # itself matters, e.g. a generator reseeded at this point)
        folded = None if force else conversions.fold_needed(self, needed, specialize)
        if folded is not None:
            return folded
        loc = user_location()
        info = BreakInfo(reason, *(loc or (None, None)))
        if self.fullgraph:
            raise GraphBreakError(reason, info.filename, info.lineno)
        self.trace.breaks.append(info)
        storages: dict[int, Storage] = {}
        for t in self.live.alive() + list(self.source_arrays.values()):
            storages.setdefault(id(t._st), t._st)
        # a walked source nothing wrote to is read from its source again,
        # not passed through the graph
        unchanged = [st for st in storages.values()
                     if self.prune_from is not None and st.source is not None
                     and st.source >= self.prune_from and st.value is st.arg
                     and not st.mutated and st.arg in self.block.args]
        sts = [st for st in storages.values() if not any(st is u for u in unchanged)]
        _, results = self._run(sts, [])
        k = len(self.trace.segments) - 1
        self._new_segment()
        for st in unchanged:
            old = st.value
            st.value = st.arg = self._arg(st.source, st.shape, st.dtype)
            self.links[st.value] = old
            st.version += 1
            st.concrete = self.source_value(st.source)
        for j, (st, arr) in enumerate(zip(sts, results)):
            old = st.value
            st.value = st.arg = self._arg(arr, st.shape, st.dtype, ref=("res", k, j))
            self.links[st.value] = old
            st.version += 1
            st.strides = arr.strides
            st.concrete = arr
        if private is not None:
            st = private._st
            arrays = [v for v in self.sources if isinstance(v, np.ndarray)]
            if any(np.may_share_memory(st.concrete, v) for v in arrays):
                own = np.copy(st.concrete, order="K")
                self.bindings[st.arg.index] = own
                st.concrete, st.strides = own, own.strides
                self.trace.replayable = False  # its binding is this call's copy
        values = [np_apply_all(t._steps, t._st.concrete) for t in needed]
        if self.grad_regions:
            self.trace.replayable = False  # gradients link graphs across the break
        self.trace.records.append(BreakRecord(
            [(self.refs[t._st.arg.index], t._steps) for t in needed],
            [np.array(v, copy=True) for v in values]))
        return values

    def eager_call(self, reason: str, fn: Callable, args: tuple, kwargs: dict,
                   mutates: "TracedArray | None" = None) -> Any:
        """A graph break around one numpy call: run it on concrete values and
        trace on with its results as new inputs. Traced operands are handed
        over as numpy views of their storage's concrete array, so an in-place
        numpy function writes where numpy would; `mutates` names the array the
        call writes to (its storage then counts as written)."""
        if mutates is None and fn in MUTATING and args and isinstance(args[0], TracedArray):
            mutates = args[0]
        if mutates is not None and mutates._readonly:
            raise ValueError("assignment destination is read-only")
        if mutates is not None:
            _no_write_through(mutates)
        r = conversions.fold_call(self, fn, args, kwargs, mutates)  # operands made from constants
        if r is not conversions.NOT_FOLDED:
            return r
        leaves, tdef = pytree.flatten((args, kwargs))
        traced = [x for x in leaves if isinstance(x, TracedArray)]
        if self.grad_regions and any(dtype_kind(x.dtype) == "f" for x in traced):
            from passes.autograd import NotDifferentiable

            name = getattr(fn, "__name__", repr(fn))
            raise NotDifferentiable(
                f"lowering.grad: {name} runs eagerly ({reason}); gradients cannot flow "
                "through it — compute it outside the differentiated function or with "
                "supported numpy calls")
        n_records = len(self.trace.records)
        concrete = iter(self.graph_break(reason, traced, private=mutates))
        piece = None
        if len(self.trace.records) == n_records + 1:  # a real break (not folded)
            piece = EagerPiece(fn, tdef, [HOLE if isinstance(x, TracedArray) else x
                                          for x in leaves])
        given = [next(concrete) if isinstance(x, TracedArray) else x for x in leaves]
        handed = [(c, t) for c, t in zip(given, leaves) if isinstance(t, TracedArray)]
        leaves = given
        a, k = pytree.unflatten(tdef, leaves)
        result = fn(*a, **k)
        if mutates is not None:
            self.links.pop(mutates._st.arg, None)  # its value is no longer the graph's
            mutates._st.mutated = True
            mutates._st.version += 1  # cached view values are stale
        if piece is None:
            return self.adopt(result, handed=handed)
        self.trace.records[-1].eager = piece
        return self.adopt(result, piece, handed)

    def adopt(self, result: Any, piece: "EagerPiece | None" = None, handed=()) -> Any:
        """Concrete arrays coming back from eager code become graph inputs
        (`piece`: the eager call that made them, recorded for later calls);
        one that is (a view of) a traced array's memory stays that array's
        view (`handed`: the (concrete, traced) operands the call got)."""
        if piece is not None:
            leaves, piece.result_tdef = pytree.flatten(result)
            out = []
            k = len(self.trace.segments) - 1
            for x in leaves:
                alias = (eager_view(self, x, handed)
                         if isinstance(x, np.ndarray) and representable(x.dtype) else None)
                if alias is not None:
                    self.trace.replayable = False  # a replay would make it a fresh input
                    piece.others.append(x)
                    out.append(alias)
                elif isinstance(x, np.ndarray) and representable(x.dtype):
                    ref = ("eager", k, len(piece.arrays))
                    piece.arrays.append((x.shape, x.dtype, x.strides))
                    st = Storage(self._arg(x, x.shape, x.dtype, ref=ref), x.shape, x.dtype,
                                 x.strides, readonly=not x.flags.writeable)
                    st.concrete, st.arg = x, st.value
                    out.append(TracedArray(self, st, ()))
                else:
                    if isinstance(x, np.ndarray) or not _plain(x):
                        self.trace.replayable = False  # Python holds it: re-trace
                    piece.others.append(x)
                    out.append(x)
            return pytree.unflatten(piece.result_tdef, out)
        if isinstance(result, np.ndarray) and representable(result.dtype):
            alias = eager_view(self, result, handed)
            if alias is not None:
                return alias
            st = Storage(self._arg(result, result.shape, result.dtype), result.shape,
                         result.dtype, result.strides, readonly=not result.flags.writeable)
            st.concrete, st.arg = result, st.value
            return TracedArray(self, st, ())
        if isinstance(result, tuple):
            return tuple(self.adopt(r, handed=handed) for r in result)
        if isinstance(result, list):
            return [self.adopt(r, handed=handed) for r in result]
        return result

    def replay_since(self, n_segments: int, start) -> tuple[Operation | None, dict]:
        """Clone the closed graphs from segment `n_segments` on (the first
        one from after op `start`) to the front of the current graph, and
        rewire the current graph's break arguments to the clones: what they
        compute flows, differentiably, into what follows. Returns the first
        cloned op of the region and the value map (closed value -> clone)."""
        cur = self.block
        anchor = cur.first_op
        vmap: dict[SSAValue, SSAValue] = {}
        first = None
        for j, seg in enumerate(self.trace.segments[n_segments:]):
            fn = next(iter(seg.module.ops))
            blk = fn.body.blocks[0]  # type: ignore[attr-defined]
            for a, binding in zip(blk.args, seg.bindings):
                link = self.links.get(a)
                if link is not None and link in vmap:
                    vmap[a] = vmap[link]
                else:
                    vmap[a] = self._arg(binding, shape_of(a), dtype_of(a))
            inside = j > 0 or start is None
            for op in blk.ops:
                if isinstance(op, func.ReturnOp):
                    continue
                c = op.clone(value_mapper=vmap)
                if anchor is not None:
                    cur.insert_op_before(c, anchor)
                else:
                    cur.add_op(c)
                if inside and first is None:
                    first = c
                if op is start:
                    inside = True
        storages = {id(t._st): t._st for t in self.live.alive()}
        storages.update({id(s): s for s in self.input_storages.values()})
        for a in list(cur.args):
            link = self.links.get(a)
            if link is None or link not in vmap:
                continue
            a.replace_all_uses_with(vmap[link])
            for st in storages.values():
                if st.value is a:
                    st.value = vmap[link]
                    st.version += 1
        if first is None:
            first = anchor
        return first, vmap

    # ---- the end ----------------------------------------------------------
    def finish(self, result: Any) -> tuple[list, Trace]:
        """Run the last graph; returns its results (writebacks not yet applied:
        `apply_plan` does that once the caller accepts the trace)."""
        leaves, treedef = pytree.flatten(result)
        storages: dict[int, Storage] = {}
        plan_leaves: list[tuple] = []
        for x in leaves:
            if isinstance(x, TracedArray):
                st = x._st
                if (st.source is not None and not x._steps and st.value is st.arg
                        and not isinstance(self.sources[st.source], np.ndarray)):
                    plan_leaves.append(("source", st.source))  # a scalar argument handed back
                    continue
                idx = list(storages).index(id(st)) if id(st) in storages else len(storages)
                storages.setdefault(id(st), st)
                plan_leaves.append(("out", idx, x._steps, x._weak if x._weak else x._scalar))
            elif isinstance(x, np.ndarray):
                i = self.source_ids.get(id(x))
                if i is not None and self.sources[i] is x:
                    t = self.wrap_source(i)
                    idx = list(storages).index(id(t._st)) if id(t._st) in storages else len(storages)
                    storages.setdefault(id(t._st), t._st)
                    plan_leaves.append(("out", idx, (), False))
                else:
                    plan_leaves.append(("copy", x.copy()))
            else:
                plan_leaves.append(("const", x))
        writebacks = []
        for i, st in self.input_storages.items():
            if st.mutated:
                idx = list(storages).index(id(st)) if id(st) in storages else len(storages)
                storages.setdefault(id(st), st)
                writebacks.append((i, idx))
        sts = list(storages.values())
        self.trace.plan = OutputPlan(treedef, plan_leaves, writebacks)
        self.trace.mutates_inputs = bool(writebacks)
        inputs, results = self._run(sts, [], last=True)
        return results, self.trace


def trace_sources(trace: Trace) -> list[int]:
    """The source indices a trace reads on every call: graph bindings,
    write-backs, scalar arguments handed back."""
    out: list[int] = []
    for seg in trace.segments:
        out.extend(b for b in seg.bindings if type(b) is int)
        out.extend(b.source for b in seg.bindings if isinstance(b, Draw) and b.source is not None)
    if trace.plan is not None:
        out.extend(s for s, _ in trace.plan.writebacks)
        out.extend(leaf[1] for leaf in trace.plan.leaves if leaf[0] == "source")
    return out


def remap_sources(trace: Trace, remap: dict[int, int]) -> None:
    """Renumber source indices (an entry keeps only the walked values it uses)."""
    def move(b):
        if type(b) is int:
            return remap.get(b, b)
        if isinstance(b, Draw):
            return b.moved(remap.get(b.source, b.source))
        return b

    for seg in trace.segments:
        seg.bindings = [move(b) for b in seg.bindings]
        seg.refs = [move(r) for r in seg.refs]
    for rec in trace.records:
        rec.needed = [(move(r), steps) for r, steps in rec.needed]
    plan = trace.plan
    if plan is not None:
        plan.writebacks = [(remap.get(s, s), r) for s, r in plan.writebacks]
        plan.leaves = [("source", remap.get(leaf[1], leaf[1])) if leaf[0] == "source" else leaf
                       for leaf in plan.leaves]


def _holds_traced(x, depth: int = 0) -> bool:
    if isinstance(x, TracedArray):
        return True
    if depth < 8 and isinstance(x, (list, tuple)):
        return any(_holds_traced(e, depth + 1) for e in x)
    return False


def _plain(x) -> bool:
    """A value whose equality says Python would do the same with it."""
    return x is None or type(x) in (bool, int, float, str, bytes) or isinstance(x, np.generic)


class LiveSet:
    """The traced arrays Python still holds (TracedArray is unhashable, like
    ndarray, so no WeakSet)."""

    def __init__(self):
        self._refs: list[weakref.ref] = []

    def add(self, t) -> None:
        self._refs.append(weakref.ref(t))
        if len(self._refs) > 4096:
            self._refs = [r for r in self._refs if r() is not None]

    def alive(self) -> list:
        out = [r() for r in self._refs]
        return [t for t in out if t is not None]


def fresh_results(results: list, inputs: list, owners: list, fresh=None,
                  written=frozenset(), dests=()) -> list:
    """Results handed to Python must not alias the inputs (unless a result is
    the unchanged input of its own storage), each other, or be read-only.
    `fresh[i]` (from the program) says result i is memory the program
    allocated in this call: it cannot alias an input, no overlap test.
    A result in `written` only goes into an argument (`apply_plan` copies
    it there, as numpy's assignment does, and hands out the argument in its
    place): where it shares no memory with the arrays written into
    (`dests`: another write-back may overwrite it before its own), it is
    left as it is, not copied first."""
    seen: set[int] = set()
    out = []
    arrays = None
    for i, (r, owner) in enumerate(zip(results, owners)):
        if i in written and not any(np.may_share_memory(r, d) for d in dests):
            out.append(r)
            continue
        if r is owner and id(r) not in seen:
            seen.add(id(r))
            out.append(r)
            continue
        if not isinstance(r, np.ndarray):
            r = np.asarray(r)
        new = fresh is not None and fresh[i]
        if not new and arrays is None:
            arrays = [x for x in inputs if isinstance(x, np.ndarray)]
        if (id(r) in seen or not r.flags.writeable
                or (not new and any(np.may_share_memory(r, x) for x in arrays))):
            r = r.copy()
        seen.add(id(r))
        out.append(r)
    return out


def apply_plan(plan: OutputPlan, results: list, sources: list) -> Any:
    for src, idx in plan.writebacks:
        dst = sources[src]
        if results[idx] is not dst:
            dst[...] = results[idx]
            results[idx] = dst
    leaves = []
    for leaf in plan.leaves:
        kind = leaf[0]
        if kind == "out":
            arr = results[leaf[1]]
            for step in leaf[2]:
                arr = step.np_apply(arr)
            scalar = leaf[3]
            # scalar: True -> numpy scalar; a Python type -> a Python scalar
            leaves.append(arr if not scalar else arr[()] if scalar is True else scalar(arr[()]))
        elif kind == "source":
            leaves.append(sources[leaf[1]])
        elif kind == "copy":
            leaves.append(leaf[1].copy())
        else:
            leaves.append(leaf[1])
    return pytree.unflatten(plan.treedef, leaves)


from .traced import TracedArray, eager_view  # noqa: E402  (TracedArray needs Tracer's helpers)
from . import conversions  # noqa: E402  (folding of values made from constants)
