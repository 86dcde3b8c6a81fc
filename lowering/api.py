"""`lowering.compile`: the one user entry. Guards first: a hit runs the cached
program; a miss traces, compiles and caches a new entry; past the recompile
limit the function runs eagerly with one warning."""

from __future__ import annotations

import builtins
import functools
import inspect
import os
import threading
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtime.errors import FloatingPointFlags, raised_as_numpy
from runtime.guards import (
    ArrayCheck,
    Check,
    ContentsCheck,
    FlagsCheck,
    GuardSet,
    IdentityCheck,
    LenCheck,
    OverlapCheck,
    RelationCheck,
    SameAsCheck,
    SizeSymbol,
    TypeCheck,
    ValueCheck,
    layout_class,
    layout_of,
)

from . import device_call, device_random, pytree
from .capture.conversions import constructors_capture
from dialects.array import written_results
from dialects.dtypes import supported
from dialects.ufuncs import FPE_CATEGORIES
from passes.keep_flags import dropped_categories
from dialects.dtypes import from_ir
from dialects.symbols import ShapeEnv, SymDim, symbols_of
from dialects.symbols import active as symbols_active
from .backends.cpu_backend import CpuProgram
from .backends.cpu_dynamic import DynamicProgram
from .dynamic import (differences, fake_leaves, plain_sizes, probe_sizes, symbolic_dims,
                      symbolic_shapes)
from .capture.random import TracedGenerator, random_capture
from .capture import sources as state_mod
from .capture.tracer import (
    BreakInfo,
    Draw,
    GraphBreakError,
    Trace,
    Tracer,
    Unsupported,
    apply_plan,
    fresh_results,
    remap_sources,
    trace_sources,
)
from .capture.traced import TracedArray
from .config import config, logger
from .fastpath import MISS, flat_positional, keyword_call, make_fast_call
from .pipeline import compile_segment, flag_categories
from .replay import replayer

MAX_KEYWORD_CALLS = 8  # generated calls kept for other keyword spellings of a call
MAX_MORE_FAST_CALLS = 8  # generated calls kept for entries after the first plain one
MODES = ("default", "reduce-overhead", "max-autotune")
MAX_VARIANTS = 16  # paths through graph breaks kept per function (then: traced per call)
_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_PKG_DIRS = tuple(_PKG + d + os.sep for d in ("lowering", "passes", "dialects", "runtime"))


class ProgramError(Exception):
    """A compiled program raised while it ran (an index out of range, a
    floating-point flag numpy acts on): the call is run again eagerly."""

    def __init__(self, error: BaseException):
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


class _CompilerFailure(Exception):
    """An exception from the pipeline (a pass, the emitter, LLVM)."""

    def __init__(self, error: BaseException):
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


class CompileError(RuntimeError):
    """Raised under `fullgraph=True` when the compiler itself fails (a pass,
    the emitter, LLVM); without it the function runs eagerly with a warning."""
BACKENDS = ("numpy", "cpu", "gpu")


class Stats(dict):
    """Counts: compiles, cache_hits, recompiles, graph_breaks, eager_fallbacks,
    and kernel_bodies: the distinct kernel bodies the compiled programs run
    (an unrolled loop's iterations that differ only in constants share one)."""

    def __init__(self):
        super().__init__(compiles=0, cache_hits=0, recompiles=0, graph_breaks=0, eager_fallbacks=0,
                         kernel_bodies=0)


def _is_traced_leaf(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic, float)) and not isinstance(x, bool)


@dataclass
class Entry:
    guards: GuardSet
    trace: Trace
    run: Callable  # (leaves, gvals, tree) -> result
    fetch: Callable | None = None  # (leaves, tree) -> the values its guards and inputs read
    # (program, bindings, output plan) where the entry is one plain graph a
    # backend="gpu" call on device arrays can run directly (device_call.py)
    device: tuple | None = None
    device_why: str = ""
    program_texts: list[str] = field(default_factory=list)

    def gvals(self, leaves, tree):
        if self.fetch is None:
            return []
        try:
            return self.fetch(leaves, tree)
        except Exception:  # a path that no longer exists: this entry does not apply
            return None


@dataclass
class StatePlan:
    """What a trace read and wrote outside its array arguments: the paths it
    reads (evaluated on every call, in guard order), and the writes replayed
    after the program with its results."""

    paths: list  # Path per gval
    writes: list  # (kind, gval index of the container, container kind, key, template)
    n_traced: int  # how many traced values the writes need (results after the user's)
    failure: BaseException | None = None  # the first call's program raised this


def _make_fetch(paths: list):
    if not paths:
        return None
    ns: dict[str, Any] = {}
    body = ", ".join(p.expr(ns) for p in paths)
    src = f"def fetch(L, R):\n    return [{body}]\n"
    exec(builtins.compile(src, "<lowering state>", "exec"), ns)
    return ns["fetch"]


class _NotForOtherSizes(Exception):
    """A program traced with size symbols cannot serve other sizes: compile
    it for the call's sizes (the reason is the message)."""


class CompiledFunction:
    def __init__(self, fn: Callable, mode: str, dynamic, fullgraph: bool, backend: str | None,
                 memory_budget: float | None = None, partition: str | None = None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        backend = backend or config.backend
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if dynamic not in (None, True, False):
            raise ValueError(f"dynamic must be True, False or None, got {dynamic!r}")
        partition = partition or config.partition
        if partition not in ("min_cut", "save_all"):
            raise ValueError(f"partition must be 'min_cut' or 'save_all', got {partition!r}")
        if memory_budget is not None and not (isinstance(memory_budget, (int, float))
                                              and 0 <= memory_budget <= 1):
            raise ValueError(f"memory_budget must be a fraction in [0, 1], got {memory_budget!r}")
        self.partition = (partition, None if memory_budget is None else float(memory_budget))
        functools.update_wrapper(self, fn)
        if not hasattr(self, "__qualname__"):  # partials, callable objects
            self.__qualname__ = self.__name__ = getattr(type(fn), "__qualname__", "function")
        self.fn, self.mode, self.fullgraph, self.backend = fn, mode, fullgraph, backend
        # the GPU backend's shapes are static: each new size compiles again
        self.dynamic = False if backend == "gpu" and dynamic is None else dynamic
        # automatic dynamic: per leaf, the dims whose size changed between calls
        self._auto_dims: dict[int, set[int]] = {}
        # arguments whose specialized value changed between calls: never
        # specialized again (Python's uses of them break the graph instead)
        self._unspecialized: set[int] = set()
        self._symbols: tuple | None = None  # (shapes, env) of the entry being made
        # the last compile with size symbols: "" kept for many sizes, else why not
        self.last_sizes: str | None = None
        self.entries: list[Entry] = []
        self.stats = Stats()
        self._warned = False
        self._sig = _signature(fn)
        self._lock = threading.RLock()  # one compile at a time per function
        self._failed: str | None = None  # a compiler failure: eager from then on
        self._variants = 0  # entries made for other paths through graph breaks
        self._last_prog: Callable | None = None  # the program the last segment ran
        self.last_trace: Trace | None = None
        self.programs_run: list = []  # programs the last trace ran, in order
        self._fast: Callable | None = None  # generated call for the first plain entry
        self._fast_kw = False  # whether it takes keyword arguments (`fastpath.access`)
        # generated calls for other keyword spellings of a plain call, by
        # (positional count, keyword names in order): f(x, y=y) after f(x, y)
        self._fast_calls: dict[tuple, Callable] = {}
        # generated calls for later plain entries (another size, another
        # specialized value), tried in order after `_fast`, each with whether
        # it takes keyword arguments: a call of any of them skips the guard
        # walk of every entry (10 µs)
        self._fast_more: list[tuple[Callable, bool]] = []
        # the last device entry a call of positional device arrays took, as
        # a call that answers MISS for other arrays (`device_call.fast_call`)
        self._device_last: Callable | None = None

    def _swap_fast(self, old: Callable, new: Callable) -> None:
        """Where the fast call is `old`, make it `new` (`make_fast_call`'s
        swap: the sizes' builtin of an entry of many sizes)."""
        if self._fast is old:
            self._fast = new

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    # ---- the call path ----------------------------------------------------
    def __call__(self, *args, **kwargs):
        if self._device_last is not None and not kwargs:  # (backend="gpu", device arrays)
            r = self._device_last(args)
            if r is not MISS:
                return r
        fast = self._fast if not kwargs or self._fast_kw else None
        if kwargs and self._fast_calls:
            fast = self._fast_calls.get((len(args), tuple(kwargs)), fast)
        if fast is not None:
            try:
                r = fast(*args, **kwargs)
            except Exception as e:  # an error at run time: numpy's own, eagerly
                return self._rerun(args, kwargs, e)
            if r is not MISS:
                self.stats["cache_hits"] += 1
                return r
        for i, (more, takes_kw) in enumerate(self._fast_more):
            if kwargs and not takes_kw:
                continue
            try:
                r = more(*args, **kwargs)
            except Exception as e:
                return self._rerun(args, kwargs, e)
            if r is not MISS:
                self.stats["cache_hits"] += 1
                # the entry called last goes in front (the one it passes
                # goes where it was): calls of one layout or size after
                # another's skip the first one's miss (0.4 us: its native
                # check, then its generated call's guards). (`_fast_kw`
                # off while the two change: a keyword call meanwhile takes
                # the calls that take keywords, or the general path)
                front, front_kw = self._fast, self._fast_kw
                if front is not None and self._fast_more[i][0] is more:
                    self._fast_kw = False
                    self._fast_more[i] = (front, front_kw)
                    self._fast = more
                    self._fast_kw = takes_kw
                return r
        tree = (args, kwargs)
        leaves, treedef = pytree.flatten(tree)
        if self.backend == "gpu":
            dev, where = device_call.device_of(leaves)
            if dev is not None:
                return device_call.call(self, args, kwargs, leaves, treedef, dev, where)
        n_seen = len(self.entries)
        r, variant = self._try_entries(self.entries[:n_seen], args, kwargs, leaves, treedef)
        if r is not MISS:
            return r
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
        if self._failed is not None:
            self.stats["eager_fallbacks"] += 1
            return self.fn(*args, **kwargs)
        with self._lock:
            # another thread may have compiled this case while we waited
            r, later = self._try_entries(self.entries[n_seen:], args, kwargs, leaves, treedef)
            if r is not MISS:
                return r
            variant = variant or later
            if self._only_views_overlap(leaves, treedef, tree):
                # writes through views that overlap need numpy's own aliasing;
                # no trace could serve them (not a recompile)
                logger("graph_breaks").info("eager call of %s: overlapping inputs are written",
                                            self.__qualname__)
                self.stats["eager_fallbacks"] += 1
                return self.fn(*args, **kwargs)
            if variant:
                # the same guards, another path through the graph breaks: one
                # more entry for it (not a recompile)
                logger("graph_breaks").info("%s: a graph break gave other values; tracing "
                                            "that path too", self.__qualname__)
            elif self.entries:
                if len(self.entries) - self._variants > config.recompile_limit:
                    reasons = self._why(self.entries[-1], treedef, leaves, tree)
                    if not self._warned:
                        self._warned = True
                        warnings.warn(
                            f"lowering: {self.__qualname__} hit the recompile limit "
                            f"({config.recompile_limit}); running eagerly from now on. Last "
                            f"guard failure: {reasons}", RuntimeWarning, stacklevel=2)
                    self.stats["eager_fallbacks"] += 1
                    return self.fn(*args, **kwargs)
                logger("recompiles").info("recompiling %s: %s", self.__qualname__,
                                          self._why(self.entries[-1], treedef, leaves, tree))
                if self.dynamic is None:
                    self._note_size_changes(leaves)
                self._note_value_changes(leaves)
                for i, e in enumerate(self.entries):
                    logger("guards").info("guard failed for %s (entry %d): %s", self.__qualname__,
                                          i, self._why(e, treedef, leaves, tree))
                self.stats["recompiles"] += 1
            return self._compile_and_run(args, kwargs, leaves, treedef)

    def _try_entries(self, entries, args, kwargs, leaves, treedef):
        """(result or MISS, whether an entry's guards held but a graph break
        went another way) for the first entry that runs this call."""
        tree = (args, kwargs)
        variant = False
        for entry in entries:
            gvals = entry.gvals(leaves, tree)
            if gvals is not None and entry.guards(treedef, leaves, gvals):
                try:
                    r = entry.run(leaves, gvals, tree)
                except Exception as e:
                    return self._rerun(args, kwargs, e), False
                if r is MISS:
                    variant = True
                    continue
                self.stats["cache_hits"] += 1
                return r, False
        return MISS, variant

    def _only_views_overlap(self, leaves, treedef, tree) -> bool:
        """Whether an entry refuses this call only because arrays it writes
        overlap others as views (not as one argument passed twice)."""
        for entry in self.entries:
            gvals = entry.gvals(leaves, tree)
            if gvals is not None and entry.guards.only_views_overlap(treedef, leaves, gvals):
                return True
        return False

    @staticmethod
    def _why(entry, treedef, leaves, tree) -> str:
        gvals = entry.gvals(leaves, tree)
        if gvals is None:
            return "a value the function reads (an attribute, item or global) is gone"
        return entry.guards.why(treedef, leaves, gvals)

    def _rerun(self, args, kwargs, error: BaseException):
        """A compiled call failed at run time (an index out of range, a
        floating-point flag numpy would act on): nothing reached the caller's
        arrays or objects yet, so the call runs again eagerly and numpy
        raises, warns and writes exactly as it would have."""
        if isinstance(error, ProgramError):
            error = error.error
        if not raised_as_numpy(error):  # the compiled program itself failed
            return self._program_failed(args, kwargs, error)
        if _no_eager_form(self.fn):  # grad/vjp of ours: numpy has no eager version
            if isinstance(error, FloatingPointFlags):
                # numpy's errstate acted on by hand, then the program again
                # with the flags ignored
                kind = getattr(self.fn, "kind", "") or "lowering"
                _act_on_flags(error.categories, f"{kind} of {self.__qualname__}")
                with np.errstate(all="ignore"):
                    return self(*args, **kwargs)
            raise error
        logger("graph_breaks").info("eager re-run of %s: %s: %s", self.__qualname__,
                                    type(error).__name__, error)
        self.stats["eager_fallbacks"] += 1
        return self.fn(*args, **kwargs)

    def _note_size_changes(self, leaves) -> None:
        """Automatic dynamic: the dims of array arguments whose size differs
        from an entry's (same rank and dtype) are symbolic from now on."""
        for e in self.entries:
            for c in e.guards.checks:
                if not isinstance(c, ArrayCheck) or c.where != "L" or c.index >= len(leaves):
                    continue
                x = leaves[c.index]
                if type(x) is np.ndarray and x.ndim == len(c.shape) and x.dtype == c.dtype:
                    for d, (want, got) in enumerate(zip(c.shape, x.shape)):
                        if isinstance(want, int) and want != got:
                            self._auto_dims.setdefault(c.index, set()).add(d)

    def _note_value_changes(self, leaves) -> None:
        """Arguments an entry was specialized on whose value this call
        changes are never specialized again: Python's uses of them break
        the graph (one more compile, not one per value)."""
        for e in self.entries:
            for c in e.guards.checks:
                if (isinstance(c, ContentsCheck) and c.where == "L" and c.index < len(leaves)
                        and c.failure(leaves, []) is not None):
                    if c.index not in self._unspecialized:
                        logger("recompiles").info(
                            "%s: %r changed value; no longer specialized on it",
                            self.__qualname__, c.name)
                    self._unspecialized.add(c.index)

    def _compile_and_run(self, args, kwargs, leaves, treedef):
        dims = symbolic_dims(self.dynamic, leaves, self._auto_dims)
        if not dims:
            return self._compile_and_run_with(args, kwargs, leaves, treedef, None)
        env = ShapeEnv()
        shapes = symbolic_shapes(env, leaves, dims)
        try:
            return self._compile_and_run_with(args, kwargs, leaves, treedef, (shapes, env))
        except _NotForOtherSizes as e:
            logger("recompiles").info("%s: compiled for these sizes only (not for other sizes: "
                                      "%s)", self.__qualname__, e)
            r = self._compile_and_run_with(args, kwargs, leaves, treedef, None)
            self.last_sizes = str(e)
            return r

    def _compile_and_run_with(self, args, kwargs, leaves, treedef, symbols):
        tree = (args, kwargs)
        state = state_mod.walk(self.fn, leaves, tree, _leaf_names(self._sig, treedef))
        if state.truncated:
            logger("guards").info("%s: the Python state reachable from the function is "
                                  "larger than the walk's bounds; values beyond them are "
                                  "read once, as constants", self.__qualname__)
        gvals = [s.value for s in state.slots]
        sources = list(leaves) + gvals
        try:
            if symbols is None:
                results, trace, plan = self._trace(args, kwargs, leaves, treedef, sources, state)
            else:
                try:
                    with symbols[1]:
                        results, trace, plan = self._trace(args, kwargs, leaves, treedef,
                                                           sources, state, symbolic=symbols[0])
                except Exception as e:
                    # (whatever went wrong with size symbols: compiled for the
                    # sizes; nothing reached the caller's arrays or objects yet)
                    state_mod.restore(state)
                    err = e.error if isinstance(e, (_CompilerFailure, ProgramError)) else e
                    raise _NotForOtherSizes(f"{type(err).__name__}: {err}") from None
        except _NotForOtherSizes:
            raise
        except Unsupported as e:
            state_mod.restore(state)
            if self.fullgraph:
                raise GraphBreakError(str(e), None, None) from None
            logger("graph_breaks").info("eager fallback for %s: %s", self.__qualname__, e)
            self.stats["eager_fallbacks"] += 1
            return self.fn(*args, **kwargs)
        except GraphBreakError:
            state_mod.restore(state)
            raise
        except ProgramError as e:  # a graph before a break failed as it ran
            state_mod.restore(state)
            return self._rerun(args, kwargs, e.error)
        except _CompilerFailure as e:
            state_mod.restore(state)
            return self._compile_failed(args, kwargs, e)
        except Exception as e:
            state_mod.restore(state)
            return self._compile_failed(args, kwargs, e)
        self.stats["compiles"] += 1
        self.stats["graph_breaks"] += len(trace.breaks)
        self.stats["kernel_bodies"] += sum(p.kernel_bodies for p in self.programs_run)
        self.last_trace = trace
        if symbols is not None:
            why = self._check_symbolic(args, kwargs, leaves, treedef, trace, plan, symbols)
            self.last_sizes = why or ""
            if why is not None:
                logger("recompiles").info("%s: compiled for these sizes only (not for other "
                                          "sizes: %s)", self.__qualname__, why)
                symbols = None
            # a size the function returns or stores is the caller's plain int
            trace.plan, plan.writes = plain_sizes(trace.plan), plain_sizes(plan.writes)
        self._symbols = symbols
        try:
            entry, gvals = self._make_entry(trace, leaves, treedef, state, plan)
        finally:
            self._symbols = None
        self.entries.append(entry)
        # (an entry for many sizes takes the fast call over from one for a few)
        if ((self._fast is None or symbols is not None) and not trace.breaks
                and not plan.writes):
            fast = make_fast_call(entry.guards, treedef, leaves, trace, self._last_prog,
                                  plan.paths, gvals, self._swap_fast)
            if fast is not None:  # (one for keywords or nested arguments takes them)
                if self._fast is not None and len(self._fast_more) < MAX_MORE_FAST_CALLS:
                    self._fast_more.insert(0, (self._fast, self._fast_kw))  # (still tried)
                self._fast, self._fast_kw = fast, not flat_positional(treedef, len(leaves))
        elif (not kwargs and not trace.breaks and not plan.writes
              and len(self._fast_more) < MAX_MORE_FAST_CALLS):
            # another size or specialized value of a plain call: a call of its own
            fast = make_fast_call(entry.guards, treedef, leaves, trace, self._last_prog,
                                  plan.paths, gvals)
            if fast is not None:
                self._fast_more.append((fast, not flat_positional(treedef, len(leaves))))
        elif (kwargs and not trace.breaks and not plan.writes and symbols is None
              and len(self._fast_calls) < MAX_KEYWORD_CALLS
              and keyword_call(treedef, len(leaves)) is not None):
            # the same function called with other keywords: a call of its own
            fast = make_fast_call(entry.guards, treedef, leaves, trace, self._last_prog,
                                  plan.paths, gvals)
            if fast is not None:
                self._fast_calls[(len(args), tuple(kwargs))] = fast
        sources = list(leaves) + gvals
        if plan.failure is not None:
            return self._rerun(args, kwargs, plan.failure)
        if entry.guards.overlaps(leaves, gvals):
            # writes through overlapping arrays need numpy's own aliasing: the
            # entry stays for later calls (its guards refuse overlap)
            logger("graph_breaks").info("eager call of %s: overlapping inputs are written",
                                        self.__qualname__)
            self.stats["eager_fallbacks"] += 1
            return self.fn(*args, **kwargs)
        return _finish(trace.plan, results, sources, plan, gvals)

    def _program_failed(self, args, kwargs, e: BaseException):
        """A compiled program raised an error that is not numpy's (a failure of
        the program itself, not of the call): the function runs eagerly from
        now on, with one warning, as when compiling fails."""
        if _no_eager_form(self.fn):  # a transformation of ours (grad, vjp)
            raise e
        self._failed = f"{type(e).__name__}: {e}"
        # (no compiled entry runs again)
        self._fast, self.entries, self._fast_more, self._fast_calls = None, [], [], {}
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        at = f" at {os.path.relpath(where.filename, _PKG)}:{where.lineno}" if where else ""
        warnings.warn(f"lowering: a compiled program of {self.__qualname__} failed{at} "
                      f"({self._failed}); running it eagerly from now on", RuntimeWarning,
                      stacklevel=3)
        self.stats["eager_fallbacks"] += 1
        return self.fn(*args, **kwargs)

    def _compile_failed(self, args, kwargs, e: Exception):
        """An exception while tracing or compiling. If the function raises it
        eagerly too, it is the function's own (numpy's) error; otherwise the
        compiler failed: the function runs eagerly from now on, with one
        warning (`fullgraph=True`: `CompileError`)."""
        original = e
        if isinstance(e, _CompilerFailure):
            internal, e = True, e.error
        else:
            tb = e.__traceback__
            last = None
            while tb is not None:
                last = tb.tb_frame.f_code.co_filename
                tb = tb.tb_next
            internal = (last is not None and last.startswith(_PKG_DIRS)
                        and not last.endswith("examples.py"))
        if _no_eager_form(self.fn):  # a transformation of ours (grad, vjp)
            raise e
        if self.fullgraph:
            if isinstance(original, _CompilerFailure):
                # numpy's own error found while compiling (a constant index out
                # of range) is the call's error; otherwise the compiler failed
                # (the call ran eagerly, as numpy would, before the error)
                self.fn(*args, **kwargs)
                raise CompileError(f"compiling {self.__qualname__} failed in {_stage_of(e)}: "
                                   f"{type(e).__name__}: {e}") from e
            raise e  # raised while tracing: numpy's error as the rules raise it
        r = self.fn(*args, **kwargs)  # raises: the function's own error, numpy's way
        self._failed = f"{type(e).__name__}: {e}"
        warnings.warn(f"lowering: compiling {self.__qualname__} failed in {_stage_of(e)} "
                      f"({self._failed}); running it eagerly from now on", RuntimeWarning,
                      stacklevel=3)
        self.stats["eager_fallbacks"] += 1
        return r

    def _trace(self, args, kwargs, leaves, treedef, sources, state, fullgraph=None, log=True,
               symbolic=None, run_segment=None):
        source_ids: dict[int, int] = {}
        for i, v in enumerate(sources):
            if isinstance(v, np.ndarray):
                source_ids.setdefault(id(v), i)
        self.programs_run = []
        tracer = Tracer(sources, run_segment or self._run_segment,
                        self.fullgraph if fullgraph is None else fullgraph, source_ids)
        tracer.unspecialized = frozenset(self._unspecialized)
        for i, shape in (symbolic or {}).items():
            tracer.symbolic_shapes[source_ids.get(id(leaves[i]), i)] = shape
        tleaves = []
        for i, x in enumerate(leaves):
            if _is_traced_leaf(x):
                j = source_ids.get(id(x), i) if isinstance(x, np.ndarray) else i
                tleaves.append(tracer.wrap_source(j))
            elif isinstance(x, state_mod.GENERATORS):
                tleaves.append(TracedGenerator(tracer, i, x))
            else:
                tleaves.append(x)
        targs, tkwargs = pytree.unflatten(treedef, tleaves)
        copies = _container_copies((args, kwargs), (targs, tkwargs))
        n = len(leaves)
        tracer.prune_from = n
        stand_ins = _StandIns(tracer, n)
        state_mod.swap_in(state, stand_ins)
        with constructors_capture(tracer), random_capture(tracer):
            out = self.fn(*targs, **tkwargs)
        writes = state_mod.diff(state) + _copy_writes(copies)
        traced: list = []
        records = [_template_write(w, state, copies, source_ids, len(leaves), traced)
                   for w in writes]
        # objects returned that hold traced values (a dataclass, a plain
        # object): rebuilt around the results on every call
        out, objects = _objects_out(out, copies, source_ids, traced)
        if objects:
            records.append(("return", None, None, None, objects))
        state_mod.restore(state)
        for c in copies:
            c.restore()
        failure = None
        try:
            results, trace = tracer.finish((out, traced) if traced else out)
        except ProgramError as e:  # compiled, but this call fails: the entry stays
            results, trace, failure = None, tracer.trace, e.error
        trace.leaf_array_ids = {id(x) for x in leaves if isinstance(x, np.ndarray)}
        if log:  # once per new entry, not on the calls that trace it again
            for b in trace.breaks:
                logger("graph_breaks").info("graph break in %s at %s", self.__qualname__, b)
            for seg in trace.segments:
                logger("graph").info("captured graph of %s:\n%s", self.__qualname__, seg.module)
        return results, trace, StatePlan([], records, len(traced), failure)

    def _run_segment(self, module, inputs):
        layouts = [layout_class(x) if isinstance(x, np.ndarray) else "C" for x in inputs]
        try:  # (the one program cache: the pipeline's, process-wide)
            prog = compile_segment(module, self.backend, layouts, structural_key(module),
                                   self.partition, self.mode, inputs)
        except Exception as e:
            raise _CompilerFailure(e) from e
        self._last_prog = prog
        if self.mode == "max-autotune" and hasattr(prog, "tune"):
            # (the GPU backend: launch configurations timed at the first run; the
            # program is this mode's own: the mode is in its ProgramKey)
            prog.tune = True
        self.programs_run.append(prog)
        try:
            return prog(inputs)
        except Exception as e:
            raise ProgramError(e) from e

    # ---- entries ------------------------------------------------------------
    def _make_entry(self, trace: Trace, leaves, treedef, state, plan: StatePlan):
        """The entry for this trace: which walked values it keeps (its inputs,
        guards and write targets, renumbered densely after the leaves), its
        guards, and its run function."""
        n = len(leaves)
        keep = _kept_slots(trace, state, plan, n)
        remap = {n + j: n + k for k, j in enumerate(keep)}
        remap_sources(trace, remap)
        plan.paths = [state.slots[j].path for j in keep]
        gvals = [state.slots[j].value for j in keep]
        # the argument containers the writes touch or store: read by path too
        copies: dict[int, int] = {}

        def copy_index(c) -> int:
            if id(c) not in copies:
                copies[id(c)] = len(gvals)
                plan.paths.append(c.path)
                gvals.append(c.original)
            return copies[id(c)]

        def fix(t):
            if t is None:
                return None
            k = t[0]
            if k == "path":
                return ("src", n + copy_index(t[1]))
            if k == "src":
                return ("src", remap.get(t[1], t[1]))
            if k == "seq":
                return ("seq", t[1], [fix(e) for e in t[2]])
            if k == "dict":
                return ("dict", [(key, fix(e)) for key, e in t[1]])
            if k == "obj":
                return ("obj", t[1], [(key, fix(e)) for key, e in t[2]])
            return t

        plan.writes = [("return", None, None, None, [fix(e) for e in t]) if kind == "return"
                       else (kind, copy_index(c) if isinstance(c, _Copy) else remap[n + c] - n,
                             ck, key, fix(t)) for kind, c, ck, key, t in plan.writes]
        replaced = {keep[c] for kind, c, ck, key, t in plan.writes
                    if kind == "replace" and c is not None and c < len(keep)}
        guards = self._guards(trace, leaves, treedef, state, keep, gvals, replaced)
        fetch = _make_fetch(plan.paths)
        if trace.breaks:
            programs = list(self.programs_run)
            if (trace.replayable and len(programs) == len(trace.segments)
                    and self._variants < MAX_VARIANTS):
                self._variants += 1
                out_plan = trace.plan

                def finish(results, sources, gvals):
                    return _finish(out_plan, results, sources, plan, gvals)

                def generators(sources):
                    draws = [r for s in trace.segments for r in s.refs if isinstance(r, Draw)]
                    saved = _generator_states(draws, sources)
                    return lambda: _restore_generators(saved)

                return Entry(guards, trace, replayer(trace, programs, finish, generators),
                             fetch), gvals

            def run_lazy(leaves, gvals, tree, args_tree=treedef):
                args, kwargs = tree
                return self._compile_and_run_again(args, kwargs, leaves, args_tree)

            return Entry(guards, trace, run_lazy, fetch), gvals
        (seg,) = trace.segments
        prog = self._last_prog
        out_plan = trace.plan
        bindings = seg.bindings
        owners = trace.owners
        sources0 = list(leaves) + gvals
        convert = [_converter(sources0[b]) if type(b) is int else b for b in bindings]
        draws = [b for b in bindings if isinstance(b, Draw)]
        written = frozenset(idx for _, idx in out_plan.writebacks)

        def run(leaves, gvals, tree):
            sources = leaves + gvals if gvals else leaves
            if draws:
                saved = _generator_states(draws, sources)
                try:
                    inputs = [b(sources) if isinstance(b, Draw) else sources[b] if conv is None
                              else conv(sources[b]) for b, conv in zip(bindings, convert)]
                    results = prog(inputs)
                except BaseException:
                    _restore_generators(saved)  # the eager re-run draws them again
                    raise
            else:
                inputs = [sources[b] if conv is None else conv(sources[b])
                          for b, conv in zip(bindings, convert)]
                results = prog(inputs)
            own = [None if i is None else inputs[i] for i in owners]
            dests = [sources[s] for s, _ in out_plan.writebacks] if written else ()
            return _finish(out_plan, fresh_results(results, inputs, own, prog.fresh, written,
                                                   dests), sources, plan, gvals)

        entry = Entry(guards, trace, run, fetch)
        if self.backend == "gpu":
            entry.device_why = _device_why(prog, bindings, draws, convert, plan, trace, leaves)
            if not entry.device_why:
                entry.device = (prog, bindings, out_plan, convert, owners)
        return entry, gvals

    def _compile_and_run_again(self, args, kwargs, leaves, treedef):
        """A function with graph breaks is traced on every call (its Python
        decides which graphs run); the compiled graphs are reused."""
        tree = (args, kwargs)
        state = state_mod.walk(self.fn, leaves, tree, _leaf_names(self._sig, treedef))
        gvals = [s.value for s in state.slots]
        sources = list(leaves) + gvals
        try:
            results, t, plan = self._trace(args, kwargs, leaves, treedef, sources, state,
                                           log=False)
        except BaseException:
            state_mod.restore(state)
            raise
        self.stats["graph_breaks"] += len(t.breaks)
        if _written_views_overlap(t, sources):
            # (this path writes where the entry's did not: no guard saw it)
            logger("graph_breaks").info("eager call of %s: overlapping inputs are written",
                                        self.__qualname__)
            self.stats["eager_fallbacks"] += 1
            return self.fn(*args, **kwargs)
        return _finish(t.plan, results, sources, plan, gvals)

    def _guards(self, trace: Trace, leaves, treedef, state, keep, gvals,
                replaced=frozenset()) -> GuardSet:
        names = _leaf_names(self._sig, treedef)
        checks: list[Check] = []
        sym_shapes = self._symbols[0] if self._symbols is not None else {}
        first: dict[int, int] = {}
        array_leaves: list[int] = []
        for i, x in enumerate(leaves):
            name = names[i] if i < len(names) else f"arg{i}"
            if isinstance(x, np.ndarray):
                if id(x) in first:
                    checks.append(SameAsCheck("L", i, name, "L", first[id(x)]))
                    continue
                first[id(x)] = i
                array_leaves.append(i)
                checks.append(_array_check("L", i, name, x, sym_shapes.get(i)))
            elif isinstance(x, np.generic):
                checks.append(TypeCheck("L", i, name, type(x), "scalar"))
            elif isinstance(x, float) and i in trace.specialized:
                checks.append(ContentsCheck.of("L", i, name, x))
            elif isinstance(x, float):
                checks.append(TypeCheck("L", i, name, float, "float"))
            elif x is None or isinstance(x, (bool, int, str, bytes)):
                checks.append(ValueCheck("L", i, name, x))
            elif isinstance(x, state_mod.GENERATORS) or state_mod._is_user_object(x):
                # read through the walk: its type decides its methods, its
                # contents are guarded by path
                checks.append(TypeCheck("L", i, name, type(x)))
            else:
                checks.append(IdentityCheck("L", i, name, x))
        # containers whose length matters: on the path of a value read, or
        # rewritten whole (a list only appended to or items set need no length)
        sized: set[int] = set()
        for j in keep:
            if state.slots[j].kind in ("array", "generator", "scalar", "callable"):
                p = state.slots[j].parent
                while p is not None and p not in sized:
                    sized.add(p)
                    p = state.slots[p].parent
        g_arrays: list[int] = []
        for k, j in enumerate(keep):
            slot = state.slots[j]
            x, label = slot.value, slot.path.label
            kind = slot.kind
            if kind == "array":
                f = first.get(id(x))
                if f is not None and f >= 0:  # the same array as an argument
                    checks.append(SameAsCheck("G", k, label, "L", f))
                    continue
                if f is not None:  # the same array as another path
                    checks.append(SameAsCheck("G", k, label, "G", -1 - f))
                    continue
                first[id(x)] = -1 - k
                g_arrays.append(k)
                checks.append(_array_check("G", k, label, x))
            elif kind == "scalar":
                checks.append(ValueCheck("G", k, label, x))
            elif kind in ("callable",):
                checks.append(IdentityCheck("G", k, label, x))
            elif kind in ("object", "generator"):
                checks.append(TypeCheck("G", k, label, type(x)))
            elif kind in ("dict", "list", "tuple"):
                checks.append(TypeCheck("G", k, label, type(x)))
                if j in sized or j in replaced:
                    checks.append(LenCheck("G", k, label, len(x)))
        for i in array_leaves:  # (after every array's type, dtype and shape)
            if i in trace.specialized:
                name = names[i] if i < len(names) else f"arg{i}"
                checks.append(ContentsCheck.of("L", i, name, trace.specialized[i]))
        if self._symbols is not None:
            checks.extend(_relation_checks(self._symbols, names))
        if trace.mutates_inputs:
            checks.append(_overlap_check(trace, len(leaves), names, array_leaves, g_arrays,
                                         [state.slots[j].path.label for j in keep]))
        flags = _flags_check(trace, self.backend)
        if flags is not None:
            checks.append(flags)
        return GuardSet(treedef, len(leaves), checks)

    def _check_symbolic(self, args, kwargs, leaves, treedef, trace, plan, symbols) -> str | None:
        """None where the program traced with size symbols serves every size
        its relations admit, else why not (`lowering/dynamic.py`): traced and
        compiled twice more at other sizes (nothing runs), all must agree."""
        shapes, env = symbols
        programs = list(self.programs_run)
        if trace.breaks:
            return "the function has graph breaks"
        if any(isinstance(b, Draw) for s in trace.segments for b in s.bindings):
            return "the function draws random numbers"
        if not programs or not all(isinstance(p, (DynamicProgram, CpuProgram)) for p in programs):
            return "its program is not a CPU program"
        values = probe_sizes(env)
        if values is None:
            return f"no other sizes satisfy {list(env.relations) or 'the relations'}"
        why = self._probe(leaves, treedef, trace, plan, symbols, programs, values)
        if why is not None:
            return why
        # and far from them (a size C code read agrees with its neighbours
        # where it is halved, or compared with a bound between them)
        far = probe_sizes(env, far=True)
        if far is None or far == values:
            return None
        return self._probe(leaves, treedef, trace, plan, symbols, programs, far)

    def _probe(self, leaves, treedef, trace, plan, symbols, programs, values) -> str | None:
        """Trace and compile at the sizes `values` (nothing runs): where the
        result differs from the call's trace, why."""
        shapes, env = symbols
        fleaves = fake_leaves(leaves, shapes, values)
        ftree = pytree.unflatten(treedef, fleaves)
        penv = ShapeEnv()
        pshapes = {i: tuple(penv.symbol(values[d.expr]) if isinstance(d, SymDim) else d
                            for d in shape) for i, shape in shapes.items()}
        probe_programs: list = []

        def run_probe(module, inputs):
            layouts = [layout_class(x) if isinstance(x, np.ndarray) else "C" for x in inputs]
            # (no inputs: nothing runs in a probe, max-autotune times nothing here)
            prog = compile_segment(module, self.backend, layouts, structural_key(module),
                                   self.partition, self.mode)
            probe_programs.append((module, prog))
            (fn,) = module.ops
            return [np.zeros(tuple(int.__int__(n) for n in t.get_shape()), from_ir(t.element_type))
                    for t in fn.function_type.outputs.data]

        pstate = state_mod.walk(self.fn, fleaves, ftree, _leaf_names(self._sig, treedef))
        psources = list(fleaves) + [sl.value for sl in pstate.slots]
        saved = (self.programs_run, self._last_prog)
        try:
            with penv:
                _, ptrace, pplan = self._trace(ftree[0], ftree[1], fleaves, treedef, psources,
                                               pstate, log=False, symbolic=pshapes,
                                               run_segment=run_probe)
        except Exception as e:
            state_mod.restore(pstate)
            return f"tracing at other sizes failed ({type(e).__name__}: {e})"
        finally:
            self.programs_run, self._last_prog = saved
        if list(penv.relations) != list(env.relations):
            return (f"other relations at other sizes: {list(env.relations)} vs "
                    f"{list(penv.relations)}")
        if len(probe_programs) != len(trace.segments):
            return "another number of graphs at other sizes"
        for seg, (pmodule, pprog), prog in zip(trace.segments, probe_programs, programs):
            why = (differences(seg.module, pmodule, path="graph")
                   or differences(prog.exprs, pprog.exprs, path="sizes")
                   or differences(prog.plan, pprog.plan, path="plan")
                   or differences(prog.keys, pprog.keys, symbols=False, path="kernels"))
            if why:
                return why
        return (differences(trace.plan, ptrace.plan, symbols=False, path="results")
                or differences(plan.writes, pplan.writes, symbols=False, path="writes"))


def _flags_check(trace: Trace, backend: str) -> FlagsCheck | None:
    """The guard an entry needs where its programs, compiled under the
    current errstate, dropped unused ops that can raise a category it
    ignores (`passes/keep_flags.py`): another errstate acting on one of
    those needs them, so another entry."""
    if backend == "gpu":  # (no flags: the device reports none)
        return None
    kept = flag_categories(backend)
    dropped: set[str] = set()
    for seg in trace.segments:
        dropped |= dropped_categories(seg.module, kept)
    if not dropped:
        return None
    return FlagsCheck("E", 0, "np.errstate", tuple(c for c in FPE_CATEGORIES if c in dropped))


def _relation_checks(symbols, names) -> list[Check]:
    """The relations recorded while compiling with size symbols, as checks
    on the arguments' dims where the symbols were bound."""
    shapes, env = symbols
    bindings = tuple((d.expr, "L", i, k, f"{names[i] if i < len(names) else f'arg{i}'}.shape[{k}]")
                     for i, shape in shapes.items()
                     for k, d in enumerate(shape) if isinstance(d, SymDim))
    return [RelationCheck("L", bindings[0][2], "sizes", rel, bindings)
            for rel in env.relations]


def _array_check(where: str, index: int, name: str, x: np.ndarray, shape=None) -> ArrayCheck:
    """The guard on an array as traced: its dtype, every size (a symbolic
    one: its symbol), its layout and, where it was writeable, that it still is."""
    dims = x.shape if shape is None else tuple(
        SizeSymbol(d.expr) if isinstance(d, SymDim) else d for d in shape)
    return ArrayCheck(where, index, name, x.dtype, dims, layout_of(x), x.flags.writeable)


class _StandIns:
    """What the trace sees in place of an array or generator found in Python
    state: its TracedArray (a graph input read by path), a traced generator."""

    def __init__(self, tracer, n: int):
        self.tracer, self.n = tracer, n

    def __call__(self, i: int, slot):
        if slot.kind == "array":
            if not supported(slot.value.dtype):
                return None
            return self.tracer.wrap_source(self.tracer.source_ids.get(id(slot.value), self.n + i))
        return TracedGenerator(self.tracer, self.n + i, slot.value)


_FLAG_TEXT = {"divide": "divide by zero", "over": "overflow", "under": "underflow",
              "invalid": "invalid value"}


def _act_on_flags(categories, where: str) -> None:
    """What numpy's errstate says to do for floating-point flags of a program
    that has no eager form (a gradient): raise, warn, call, print or log."""
    modes = np.geterr()
    for c in categories:
        msg = f"{_FLAG_TEXT[c]} encountered in {where}"
        mode = modes[c]
        if mode == "raise":
            raise FloatingPointError(msg)
        if mode == "warn":
            warnings.warn(msg, RuntimeWarning, stacklevel=4)
        elif mode == "call":
            np.geterrcall()(msg, c)
        elif mode == "print":
            print(f"Warning: {msg}")
        elif mode == "log":
            np.geterrcall().write(f"Warning: {msg}\n")


def _no_eager_form(fn) -> bool:
    """grad/value_and_grad/vjp objects and the joint functions made of them:
    calling them is compiling them, so an eager re-run would recurse."""
    mod = ((fn.__module__ if inspect.isfunction(fn) else type(fn).__module__) or "")
    return mod.startswith("lowering") and mod != "lowering.examples"


def _stage_of(e: BaseException) -> str:
    """Where in the compiler an exception came from: its innermost frame in
    this project (a pass, the emitter, the runtime), as path:function."""
    where = "the compiler"
    tb = e.__traceback__
    while tb is not None:
        f = tb.tb_frame.f_code.co_filename
        if f.startswith(_PKG_DIRS):
            where = f"{os.path.relpath(f, _PKG)}:{tb.tb_frame.f_code.co_name}"
        tb = tb.tb_next
    return where


def structural_key(module) -> tuple:
    """A key equal for two captured graphs exactly when they are the same
    program (ops, their properties and attributes, operands, types), made
    without printing the IR."""
    (fn,) = module.ops
    block = fn.body.blocks[0]
    ids = {a: i for i, a in enumerate(block.args)}
    # (the results written into arguments: the program may compute them there)
    parts: list = [tuple(a.type for a in block.args), tuple(written_results(fn).items())]
    for op in block.ops:
        if op.regions:
            return (str(module), () if not symbols_active() else symbols_of([a.type for a in block.args]
                                                  + [(o.properties, o.attributes, [r.type for r in o.results])
                                                     for o in module.walk()]))
        operands = tuple(ids[o] for o in op.operands)
        for r in op.results:
            ids[r] = len(ids)
        parts.append((op.name, operands, tuple(op.properties.items()),
                      tuple(op.attributes.items()), tuple(r.type for r in op.results)))
    # (a size symbol's value compares equal to the plain size: its expression
    # keeps a symbolic program apart from the one compiled for that size)
    return tuple(parts) + (symbols_of(parts) if symbols_active() else (),)


def _device_why(prog, bindings, draws, convert, plan: StatePlan, trace, leaves) -> str:
    """Why an entry of a backend="gpu" function cannot run its program on
    device arrays directly ("" where it can)."""
    if not hasattr(prog, "run_device"):
        return "its program is not a GPU program"
    n = len(leaves)
    for i, b in enumerate(bindings):
        if isinstance(b, Draw):  # (made on the device: lowering/device_random.py)
            if b.source is not None and not b.source < n:
                return "it draws random numbers from a generator of its Python state"
            why = device_random.why_not(b, prog.input_types[i][1])
            if why:
                return why
    if plan.writes:
        return "it writes Python state"
    # (a float argument's value is part of the device entry's key; an array's
    # contents are not)
    if any(type(v) is not float for v in trace.specialized.values()):
        return "it is specialized on the values of an array argument"
    if not all(type(b) is int and b < n or isinstance(b, Draw) for b in bindings):
        return "its graph reads values of Python state"
    # (a Python scalar argument is converted to a 0-d array and copied over)
    if any(c is not None and type(b) is int and type(leaves[b]) not in (float, int, bool)
           for b, c in zip(bindings, convert)):
        return "its graph reads converted arguments"
    for leaf in trace.plan.leaves:
        if leaf[0] == "copy" or leaf[0] == "out" and leaf[2]:
            return "a result is a view or a copy made outside the graph"
    return ""


def _finish(out_plan, results, sources, plan: StatePlan, gvals):
    """Write back into the caller's arrays, build the return value, then
    replay the writes to Python state with this call's values."""
    if not plan.n_traced:
        out, written = apply_plan(out_plan, results, sources), []
    else:
        out, written = apply_plan(out_plan, results, sources)
    for kind, c, ckind, key, template in plan.writes:
        if kind == "return":
            out = _objects_in(out, template, written, sources)
            continue
        value = None if kind == "del" else state_mod.instantiate(template, written, sources)
        state_mod.apply_write(kind, gvals[c], ckind, key, value)
    return out


class _ObjectOut:
    """Where a returned object holding traced values goes back in."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def _objects_out(out, copies, source_ids, traced):
    """The return value with each object leaf that holds traced values
    replaced by a marker, and those objects' templates."""
    leaves, tdef = pytree.flatten(out)
    objects = []
    for i, x in enumerate(leaves):
        if not isinstance(x, TracedArray) and state_mod._is_user_object(x) and _holds_traced(x):
            objects.append(_template(x, copies, source_ids, traced))
            leaves[i] = _ObjectOut(len(objects) - 1)
    return (pytree.unflatten(tdef, leaves) if objects else out), objects


def _objects_in(out, templates, written, sources):
    leaves, tdef = pytree.flatten(out)
    leaves = [state_mod.instantiate(templates[x.index], written, sources)
              if isinstance(x, _ObjectOut) else x for x in leaves]
    return pytree.unflatten(tdef, leaves)


class _Copy:
    """A container of the arguments as the traced function saw it (pytree
    containers are rebuilt around traced leaves) and the caller's original."""

    def __init__(self, path, original, copy):
        self.path, self.original, self.copy = path, original, copy
        self.snapshot = dict(copy) if type(copy) is dict else list(copy)

    def restore(self):
        pass  # the copy is the trace's own; nothing of the caller's changed


def _container_copies(tree, ttree) -> list[_Copy]:
    out: list[_Copy] = []
    stack = [(state_mod.Path("R", None, (), "args"), tree, ttree)]
    while stack:
        path, a, b = stack.pop()
        t = type(a)
        if t is tuple or t is list:
            if t is list:
                out.append(_Copy(path, a, b))
            for i, (x, y) in enumerate(zip(a, b)):
                stack.append((path.child("i", i, f"{path.label}[{i}]"), x, y))
        elif t is dict:
            out.append(_Copy(path, a, b))
            for k in a:
                stack.append((path.child("i", k, f"{path.label}[{k!r}]"), a[k], b[k]))
    return out


def _copy_writes(copies: list[_Copy]) -> list[tuple]:
    """Writes into the argument containers, as ("set"/"del"/"extend"/"replace",
    _Copy, ...) records."""
    writes: list[tuple] = []
    for c in copies:
        now = c.copy
        if type(now) is dict:
            for k, old in c.snapshot.items():
                if k not in now:
                    writes.append(("del", c, k))
                elif now[k] is not old:
                    writes.append(("set", c, k, now[k]))
            for k in now:
                if k not in c.snapshot:
                    writes.append(("set", c, k, now[k]))
        else:
            old = c.snapshot
            if len(now) >= len(old) and all(x is y for x, y in zip(old, now)):
                if len(now) > len(old):
                    writes.append(("extend", c, None, list(now[len(old):])))
            else:
                writes.append(("replace", c, None, list(now)))
    return writes


def _template_write(w, state, copies, source_ids, n_leaves, traced):
    """A recorded write as (kind, container slot or _Copy, container kind, key, template)."""
    kind, where = w[0], w[1]
    if isinstance(where, _Copy):
        ckind = "dict" if type(where.copy) is dict else "list"
    else:
        ckind = state.slots[where].kind
    key = w[2] if kind in ("set", "del") else None
    if kind == "del":
        return (kind, where, ckind, key, None)
    value = w[3]
    if kind in ("extend", "replace"):
        t = ("seq", list, [_template(v, copies, source_ids, traced) for v in value])
    else:
        t = _template(value, copies, source_ids, traced)
    return (kind, where, ckind, key, t)


def _template(v, copies, source_ids, traced, depth=0):
    if isinstance(v, TracedArray):
        v._check_alive() if hasattr(v, "_check_alive") else None
        traced.append(v)
        return ("t", len(traced) - 1)
    for c in copies:
        if c.copy is v:  # an argument container: the caller's own object
            return ("path", c)
    if isinstance(v, np.ndarray) and id(v) in source_ids:
        return ("src", source_ids[id(v)])
    t = type(v)
    if depth < 16:
        if t is list or t is tuple:
            return ("seq", t, [_template(e, copies, source_ids, traced, depth + 1) for e in v])
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return ("seq", t, [_template(e, copies, source_ids, traced, depth + 1) for e in v])
        if t is dict:
            return ("dict", [(k, _template(e, copies, source_ids, traced, depth + 1))
                             for k, e in v.items()])
        if state_mod._is_user_object(v) and any(_holds_traced(e) for e in vars(v).values()):
            return ("obj", v, [(k, _template(e, copies, source_ids, traced, depth + 1))
                               for k, e in vars(v).items()])
    if _holds_traced(v):
        raise Unsupported(f"a traced value is stored inside a {t.__name__} object")
    return ("const", v)


def _holds_traced(v, depth=0) -> bool:
    if isinstance(v, TracedArray):
        return True
    if depth > 8:
        return False
    t = type(v)
    if t is list or t is tuple or (isinstance(v, tuple) and hasattr(v, "_fields")):
        return any(_holds_traced(e, depth + 1) for e in v)
    if t is dict:
        return any(_holds_traced(e, depth + 1) for e in v.values())
    if state_mod._is_user_object(v):
        return any(_holds_traced(e, depth + 1) for e in vars(v).values())
    return False


def _kept_slots(trace: Trace, state, plan: StatePlan, n: int) -> list[int]:
    """The walked slots an entry reads on every call: arrays and generators
    its graphs use, the containers it writes, every scalar and callable (they
    may have steered the trace), and the containers and objects on their
    paths (their types and lengths are guarded)."""
    used: set[int] = set()
    for j in trace_sources(trace):
        if j >= n:
            used.add(j - n)
    for kind, c, ck, key, t in plan.writes:
        if isinstance(c, int):
            used.add(c)
        for e in (t if kind == "return" else [t]):
            used.update(j - n for j in _template_sources(e) if j >= n)
    # (a list the function only appends to is a log: what it held before is
    # not read, so its items are not guarded)
    appended = {c for kind, c, ck, key, t in plan.writes if kind == "extend" and isinstance(c, int)}
    for j, s in enumerate(state.slots):
        if s.kind in ("scalar", "callable") and s.parent not in appended:
            used.add(j)
    # the other paths of a used array, and walked arrays that are arguments
    # too (the trace read them as the argument): aliases are guarded
    ids = {id(state.slots[j].value) for j in used if state.slots[j].kind == "array"}
    ids |= getattr(trace, "leaf_array_ids", set())
    for j, s in enumerate(state.slots):
        if s.kind == "array" and id(s.value) in ids:
            used.add(j)
    for j in list(used):
        p = state.slots[j].parent
        while p is not None and p not in used:
            used.add(p)
            p = state.slots[p].parent
    return sorted(used)


def _template_sources(t) -> list[int]:
    if t is None:
        return []
    k = t[0]
    if k == "src":
        return [t[1]]
    if k == "seq":
        return [j for e in t[2] for j in _template_sources(e)]
    if k == "dict":
        return [j for _, e in t[1] for j in _template_sources(e)]
    if k == "obj":
        return [j for _, e in t[2] for j in _template_sources(e)]
    return []


def _generator_states(draws, sources) -> list:
    out, seen = [], set()
    for d in draws:
        g = d.generator(sources)
        if id(g) not in seen:
            seen.add(id(g))
            out.append((g, g.get_state() if isinstance(g, np.random.RandomState)
                        else g.bit_generator.state))
    return out


def _restore_generators(saved) -> None:
    for g, st in saved:
        if isinstance(g, np.random.RandomState):
            g.set_state(st)
        else:
            g.bit_generator.state = st


def _converter(x):
    """How a source becomes a graph input: floats and numpy scalars as 0-d arrays."""
    if isinstance(x, float):
        return lambda v: np.asarray(v, np.float64)
    if isinstance(x, np.generic):
        return np.asarray
    return None


def _overlap_check(trace: Trace, n: int, names: list[str], array_leaves: list[int],
                   g_arrays: list[int], labels: list[str]) -> OverlapCheck:
    """The guard that the arrays a mutating entry writes (its write-backs;
    every array where graph breaks may take another path) overlap no other
    array it was traced with as distinct."""
    arrays = [("L", i, names[i] if i < len(names) else f"arg{i}") for i in array_leaves]
    arrays += [("G", k, labels[k]) for k in g_arrays]
    written = {s for s, _ in trace.plan.writebacks}
    if not trace.breaks:
        arrays.sort(key=lambda a: (a[1] if a[0] == "L" else n + a[1]) not in written)
        n_written = sum((a[1] if a[0] == "L" else n + a[1]) in written for a in arrays)
    else:
        n_written = len(arrays)
    first = arrays[0] if arrays else ("L", 0, "arguments")
    return OverlapCheck(first[0], first[1], first[2], tuple(arrays), n_written)


def _written_views_overlap(trace: Trace, sources) -> bool:
    """Does an array this trace writes overlap another of its sources as a
    view (one object passed twice is one source to the tracer: modelled)?"""
    written = {s for s, _ in trace.plan.writebacks} if trace.plan is not None else set()
    for i in written:
        a = sources[i]
        for j, b in enumerate(sources):
            if (j != i and isinstance(b, np.ndarray) and a is not b
                    and np.may_share_memory(a, b)):
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

    `mode`: "default"; "max-autotune" (GPU: each kernel's launch
    configurations timed at its first run, the fastest kept; CPU: the
    program's candidate lowerings — the cost model's choices, each forced
    to generated kernels or to library routines, one thread, half-width
    vectors — timed on the first call's arguments, the fastest kept:
    lowering/autotune.py; winners of both are kept in the on-disk cache);
    "reduce-overhead" (GPU: calls on device arrays replay one CUDA graph
    per device entry — arguments copied into the graph's own buffers unless
    passed at the addresses it was captured with, results cloned; programs
    it cannot capture run as in "default": lowering/device_graph.py). A
    GPU program is compiled per mode: modes never share one.

    For differentiated functions (`compile(value_and_grad(f))`): `partition`
    ("min_cut", the default, or "save_all") chooses what the forward saves for
    the backward; `memory_budget` (a fraction of save_all's bytes) asks for the
    least recomputation that fits (see passes/remat.py)."""
    if fn is None:
        return lambda f: CompiledFunction(f, mode, dynamic, fullgraph, backend, memory_budget,
                                          partition)
    return CompiledFunction(fn, mode, dynamic, fullgraph, backend, memory_budget, partition)
