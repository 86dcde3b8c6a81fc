"""`lowering.compile`: the one user entry. Guards first: a hit runs the cached
program; a miss traces, compiles and caches a new entry; past the recompile
limit the function runs eagerly with one warning."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtime.guards import Check, GuardSet, layout_class, layout_of

from . import pytree
from .capture.conversions import constructors_capture
from .capture.sources import GlobalSource, discover
from .capture.tracer import (
    BreakInfo,
    GraphBreakError,
    Trace,
    Tracer,
    Unsupported,
    apply_plan,
    fresh_results,
)
from .capture.traced import TracedArray
from .config import config, logger
from .fastpath import MISS, make_fast_call
from .pipeline import compile_segment

MODES = ("default", "reduce-overhead", "max-autotune")
BACKENDS = ("numpy", "cpu")


class Stats(dict):
    """Counts: compiles, cache_hits, recompiles, graph_breaks, eager_fallbacks."""

    def __init__(self):
        super().__init__(compiles=0, cache_hits=0, recompiles=0, graph_breaks=0, eager_fallbacks=0)


def _is_traced_leaf(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic, float)) and not isinstance(x, bool)


@dataclass
class Entry:
    guards: GuardSet
    trace: Trace
    run: Callable  # (leaves, sources) -> result
    program_texts: list[str] = field(default_factory=list)


class CompiledFunction:
    def __init__(self, fn: Callable, mode: str, dynamic, fullgraph: bool, backend: str | None,
                 memory_budget: float | None = None, partition: str | None = None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        backend = backend or config.backend
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if dynamic:
            raise NotImplementedError("dynamic=True: symbolic shapes are not supported yet; "
                                      "shapes are specialized and guarded")
        partition = partition or config.partition
        if partition not in ("min_cut", "save_all"):
            raise ValueError(f"partition must be 'min_cut' or 'save_all', got {partition!r}")
        if memory_budget is not None and not (isinstance(memory_budget, (int, float))
                                              and 0 <= memory_budget <= 1):
            raise ValueError(f"memory_budget must be a fraction in [0, 1], got {memory_budget!r}")
        self.partition = (partition, None if memory_budget is None else float(memory_budget))
        functools.update_wrapper(self, fn)
        self.fn, self.mode, self.fullgraph, self.backend = fn, mode, fullgraph, backend
        self.entries: list[Entry] = []
        self.stats = Stats()
        self._warned = False
        self._sig = _signature(fn)
        self._arrays, self._scalars = discover(fn)
        self._segment_cache: dict[str, Callable] = {}
        self.last_trace: Trace | None = None
        self.programs_run: list = []  # programs the last trace ran, in order
        self._fast: Callable | None = None  # generated call for the first plain entry

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    # ---- the call path ----------------------------------------------------
    def __call__(self, *args, **kwargs):
        if self._fast is not None and not kwargs:
            r = self._fast(*args)
            if r is not MISS:
                self.stats["cache_hits"] += 1
                return r
        leaves, treedef = pytree.flatten((args, kwargs))
        gvals = [g.get() for g in self._arrays] + [g.get() for g in self._scalars]
        for entry in self.entries:
            if entry.guards(treedef, leaves, gvals):
                self.stats["cache_hits"] += 1
                return entry.run(leaves, gvals)
        # (guards accept exact ndarrays only: these leaves never hit an entry)
        for x in leaves:
            if isinstance(x, TracedArray):
                # called inside another trace (e.g. grad(compile(f))): inline
                return self.fn(*args, **kwargs)
            if isinstance(x, np.ndarray) and type(x) is not np.ndarray:
                # ndarray subclasses (np.matrix, masked arrays, ...) redefine
                # numpy's operations: they run eagerly, as numpy itself
                logger("graph_breaks").info("eager call of %s: an argument is an ndarray "
                                            "subclass", self.__qualname__)
                self.stats["eager_fallbacks"] += 1
                return self.fn(*args, **kwargs)
        if self.entries:
            reasons = "; ".join(e.guards.why(treedef, leaves, gvals) for e in self.entries)
            if len(self.entries) > config.recompile_limit:
                if not self._warned:
                    self._warned = True
                    warnings.warn(
                        f"lowering: {self.__qualname__} hit the recompile limit "
                        f"({config.recompile_limit}); running eagerly from now on. Last "
                        f"guard failure: {reasons}", RuntimeWarning, stacklevel=2)
                self.stats["eager_fallbacks"] += 1
                return self.fn(*args, **kwargs)
            logger("recompiles").info("recompiling %s: %s", self.__qualname__, reasons)
            logger("guards").info("guard failed for %s: %s", self.__qualname__, reasons)
            self.stats["recompiles"] += 1
        return self._compile_and_run(args, kwargs, leaves, treedef, gvals)

    def _compile_and_run(self, args, kwargs, leaves, treedef, gvals):
        n_arr = len(self._arrays)
        sources = list(leaves) + gvals[:n_arr]
        try:
            results, trace = self._trace(args, kwargs, leaves, treedef, sources)
        except Unsupported as e:
            if self.fullgraph:
                raise GraphBreakError(str(e), None, None) from None
            logger("graph_breaks").info("eager fallback for %s: %s", self.__qualname__, e)
            self.stats["eager_fallbacks"] += 1
            return self.fn(*args, **kwargs)
        self.stats["compiles"] += 1
        self.stats["graph_breaks"] += len(trace.breaks)
        self.last_trace = trace
        entry = self._make_entry(trace, leaves, treedef, gvals)
        self.entries.append(entry)
        if self._fast is None and not trace.breaks:
            self._fast = make_fast_call(entry.guards, treedef, leaves, trace,
                                        self._segment_cache[self._last_key],
                                        len(self._arrays) + len(self._scalars))
        if trace.mutates_inputs and _overlap_any(sources):
            # writes through overlapping arrays need numpy's own aliasing: the
            # entry stays for later calls (its guards refuse overlap)
            logger("graph_breaks").info("eager call of %s: overlapping inputs are written",
                                        self.__qualname__)
            self.stats["eager_fallbacks"] += 1
            return self.fn(*args, **kwargs)
        return apply_plan(trace.plan, results, sources)

    def _trace(self, args, kwargs, leaves, treedef, sources, fullgraph=None):
        n_leaves = len(leaves)
        source_ids: dict[int, int] = {}
        for i, v in enumerate(sources):
            if isinstance(v, np.ndarray):
                source_ids.setdefault(id(v), i)
        self.programs_run = []
        tracer = Tracer(sources, self._run_segment, self.fullgraph if fullgraph is None else fullgraph,
                        source_ids)
        tleaves = []
        for i, x in enumerate(leaves):
            if _is_traced_leaf(x):
                j = source_ids.get(id(x), i) if isinstance(x, np.ndarray) else i
                tleaves.append(tracer.wrap_source(j))
            else:
                tleaves.append(x)
        targs, tkwargs = pytree.unflatten(treedef, tleaves)
        with constructors_capture():
            out = self.fn(*targs, **tkwargs)
        results, trace = tracer.finish(out)
        for b in trace.breaks:
            logger("graph_breaks").info("graph break in %s at %s", self.__qualname__, b)
        for seg in trace.segments:
            logger("graph").info("captured graph of %s:\n%s", self.__qualname__, seg.module)
        del n_leaves
        return results, trace

    def _run_segment(self, module, inputs):
        layouts = [layout_class(x) if isinstance(x, np.ndarray) else "C" for x in inputs]
        key = (str(module), tuple(layouts))
        prog = self._segment_cache.get(key)
        if prog is None:
            prog = compile_segment(module, self.backend, layouts, key[0], self.partition)
            self._segment_cache[key] = prog
        self._last_key = key
        self.programs_run.append(prog)
        return prog(inputs)

    # ---- entries ------------------------------------------------------------
    def _make_entry(self, trace: Trace, leaves, treedef, gvals) -> Entry:
        guards = self._guards(trace, leaves, treedef, gvals)
        n_arr = len(self._arrays)
        if trace.breaks:
            def run_lazy(leaves, gvals, args_tree=treedef):
                args, kwargs = pytree.unflatten(args_tree, leaves)
                sources = list(leaves) + gvals[:n_arr]
                results, t = self._trace(args, kwargs, leaves, args_tree, sources)
                self.stats["graph_breaks"] += len(t.breaks)
                return apply_plan(t.plan, results, sources)

            return Entry(guards, trace, run_lazy)
        (seg,) = trace.segments
        prog = self._segment_cache[self._last_key]
        plan = trace.plan
        bindings = seg.bindings
        owners = trace.owners
        convert = [_converter(leaves[b] if b < len(leaves) else None) for b in bindings]

        def run(leaves, gvals):
            sources = leaves + gvals[:n_arr] if n_arr else leaves
            inputs = [sources[b] if conv is None else conv(sources[b])
                      for b, conv in zip(bindings, convert)]
            results = prog(inputs)
            own = [None if i is None else inputs[i] for i in owners]
            return apply_plan(plan, fresh_results(results, inputs, own, getattr(prog, "fresh", None)),
                              sources)

        return Entry(guards, trace, run)

    def _guards(self, trace: Trace, leaves, treedef, gvals) -> GuardSet:
        names = _leaf_names(self._sig, treedef)
        checks: list[Check] = []
        first: dict[int, int] = {}
        array_leaves: list[int] = []
        for i, x in enumerate(leaves):
            name = names[i] if i < len(names) else f"arg{i}"
            if isinstance(x, np.ndarray):
                if id(x) in first:
                    checks.append(Check("L", i, name, "alias", first[id(x)]))
                    continue
                first[id(x)] = i
                array_leaves.append(i)
                checks.append(Check("L", i, name, "array",
                                    (x.dtype, x.shape, layout_of(x), x.flags.writeable)))
            elif isinstance(x, np.generic):
                checks.append(Check("L", i, name, "generic", type(x)))
            elif isinstance(x, float):
                checks.append(Check("L", i, name, "float"))
            elif x is None or isinstance(x, (bool, int, str, bytes)):
                checks.append(Check("L", i, name, "value", x))
            else:
                checks.append(Check("L", i, name, "identity", x))
        n_arr = len(self._arrays)
        for j, g in enumerate(self._arrays):
            x = gvals[j]
            checks.append(Check("G", j, g.name, "array",
                                (x.dtype, x.shape, layout_of(x), x.flags.writeable)))
        for j, g in enumerate(self._scalars):
            checks.append(Check("G", n_arr + j, g.name, "value", gvals[n_arr + j]))
        return GuardSet(treedef, len(leaves), checks, trace.mutates_inputs, array_leaves)


def _converter(x):
    """How a source becomes a graph input: floats and numpy scalars as 0-d arrays."""
    if isinstance(x, float):
        return lambda v: np.asarray(v, np.float64)
    if isinstance(x, np.generic):
        return np.asarray
    return None


def _overlap_any(sources) -> bool:
    arrs = [s for s in sources if isinstance(s, np.ndarray)]
    for i in range(len(arrs)):
        for j in range(i + 1, len(arrs)):
            if arrs[i] is not arrs[j] and np.may_share_memory(arrs[i], arrs[j]):
                return True
    return False


def _signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _leaf_names(sig, treedef) -> list[str]:
    """Readable names for the leaves of (args, kwargs): `x`, `params['W1']`."""
    params = list(sig.parameters.values()) if sig is not None else []
    paths = pytree.paths(treedef)
    out = []
    for p in paths:
        # p looks like "[0][i]..." for args or "[1]['k']..." for kwargs
        head, rest = p[:3], p[3:]
        if head == "[0]":
            idx_end = rest.index("]")
            i = int(rest[1:idx_end])
            tail = rest[idx_end + 1:]
            name = params[i].name if i < len(params) and params[i].kind in (
                inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) else f"args[{i}]"
            out.append(name + tail)
        else:
            k_end = rest.index("]")
            out.append(rest[2:k_end - 1] + rest[k_end + 1:])
    return out


def compile(fn: Callable | None = None, *, mode: str = "default", dynamic=None,
            fullgraph: bool = False, backend: str | None = None,
            memory_budget: float | None = None, partition: str | None = None):
    """Compile a numpy function. Usable as `@compile` or `@compile(...)`.

    For differentiated functions (`compile(value_and_grad(f))`): `partition`
    ("min_cut", the default, or "save_all") chooses what the forward saves for
    the backward; `memory_budget` (a fraction of save_all's bytes) asks for the
    least recomputation that fits (see passes/remat.py)."""
    if fn is None:
        return lambda f: CompiledFunction(f, mode, dynamic, fullgraph, backend, memory_budget,
                                          partition)
    return CompiledFunction(fn, mode, dynamic, fullgraph, backend, memory_budget, partition)
