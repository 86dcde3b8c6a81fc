"""The capture rule tables: numpy function -> rule, ufunc method -> rule.

A rule receives the tracer and numpy's own arguments and returns TracedArrays
(or raises `Unsupported`, which becomes a graph break with the rule's reason).
Rules live in `capture/rules/`, one file per family, registered with `@rule`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from dialects.dtypes import ExternOnlyError
from dialects.symbols import to_internal, to_user

from .tracer import Unsupported

FUNCTIONS: dict[Callable, Callable] = {}
UFUNC_METHODS: dict[str, Callable] = {}  # "__call__", "reduce", "accumulate", "at", "outer"


def rule(*funcs: Callable):
    def register(impl: Callable) -> Callable:
        for f in funcs:
            FUNCTIONS[f] = impl
        return impl

    return register


def ufunc_method(name: str):
    def register(impl: Callable) -> Callable:
        UFUNC_METHODS[name] = impl
        return impl

    return register


def _tracer_of(args) -> Any:
    from .traced import TracedArray

    stack = list(args)
    while stack:
        x = stack.pop()
        if isinstance(x, TracedArray):
            return x._t
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
    return None


def call_function(tracer, func: Callable, args: tuple, kwargs: dict) -> Any:
    _load_rules()
    impl = FUNCTIONS.get(func)
    if impl is None:
        return tracer.eager_call(f"np.{getattr(func, '__name__', func)} has no capture rule",
                                 func, args, kwargs)
    try:  # (the user's SymSizes in, the compiler's sizes out as SymSizes)
        return to_user(impl(tracer, *to_internal(args), **to_internal(kwargs)))
    except (Unsupported, ExternOnlyError) as e:
        return tracer.eager_call(f"np.{func.__name__}: {e}", func, args, kwargs)


def call_ufunc(tracer, ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    _load_rules()
    impl = UFUNC_METHODS.get(method)
    fn = getattr(ufunc, method) if method != "__call__" else ufunc
    if method in ("__call__", "outer") and any(type(x) in (list, tuple) for x in inputs):
        # a list holding traced values (`x * [a, b]`) is one array, as
        # np.asarray makes it — not a graph break per element
        inputs = tuple(tracer.lift(x) if type(x) in (list, tuple) and _tracer_of([x]) is not None
                       else x for x in inputs)
    if impl is None:
        return tracer.eager_call(f"np.{ufunc.__name__}.{method} has no capture rule",
                                 fn, inputs, kwargs)
    try:
        return to_user(impl(tracer, ufunc, *to_internal(inputs), **to_internal(kwargs)))
    except (Unsupported, ExternOnlyError) as e:
        return tracer.eager_call(f"np.{ufunc.__name__}: {e}", fn, inputs, kwargs)


def astype(x, dtype, casting="unsafe", copy=True):
    _load_rules()
    return FUNCTIONS[np.ndarray.astype](x._t, x, dtype, casting=casting, copy=copy)


_loaded = False
_loading = False  # this thread is importing them (a rule module asking again gets what is there)
_load_lock = threading.RLock()


def _load_rules() -> None:
    """Import every rule family, once per process. `_loaded` turns true only
    after the tables are complete, and a thread that arrives while another is
    importing waits for it: no first call, on any thread, sees a partial table
    (a rule missing there would be a spurious graph break)."""
    global _loaded, _loading
    if _loaded:
        return
    with _load_lock:
        if _loaded or _loading:
            return
        _loading = True
        try:
            from . import rules  # noqa: F401  (registers every rule family)
        finally:
            _loading = False
        _loaded = True
