"""The four peers of the programs benchmark. `prepare(peer, program,
inputs)` gives a zero-argument callable computing the program's result;
each call of `prepare` wraps afresh (a new `lowering.compile` or
`jax.jit`), so a first call includes that peer's compile — except numba's
dispatcher, one per program for the process: numba compiles per type
signature, and S and M share theirs (compiling at M again would only measure
numba's compiler a second time: 1–10 s per program on 2 cores).

- numpy: the program as written.
- lowering: `lowering.compile(program.fn)`, defaults; its `fn.stats` are
  the peer's counters.
- numba: `njit` of the very same function (`Program.numba == "same"`; the
  module's helper functions it calls are jitted too, as a numba user
  decorates them), or the explicit-loop variant of the program's module
  (`"loops"`).
- jax: `jax.jit` of the module's jax.numpy version, float64 enabled; the
  program's int arguments (step counts, sizes) are static, its arrays are
  put on the device once, outside the timing; results stay jax arrays (the
  check converts them)."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from types import FunctionType
from typing import Any

import numpy as np

from ..peers.base import NotExpressible
from . import DOMAINS
from .base import Program

PEERS = ("numpy", "lowering", "numba", "jax")
MODULES = {"numpy": "numpy", "lowering": "lowering", "numba": "numba", "jax": "jax"}


def unavailable(peer: str) -> str | None:
    """None when the peer's package imports, else the import error."""
    try:
        importlib.import_module(MODULES[peer])
    except Exception as e:  # noqa: BLE001 - any import failure disqualifies
        return f"{type(e).__name__}: {e}"
    return None


def version(peer: str) -> str:
    return getattr(importlib.import_module(MODULES[peer]), "__version__", "?")


def prepare(peer: str, p: Program, inputs: tuple) -> Callable[[], Any]:
    if peer in p.not_expressible:
        raise NotExpressible(p.not_expressible[peer])
    return {"numpy": _numpy, "lowering": _lowering, "numba": _numba, "jax": _jax}[peer](p, inputs)


def stats(run: Callable[[], Any]) -> dict | None:
    """lowering's counters for a callable from `prepare` (None for the others)."""
    compiled = getattr(run, "compiled", None)
    return dict(compiled.stats) if compiled is not None else None


def _numpy(p: Program, inputs: tuple) -> Callable[[], Any]:
    fn = p.fn
    return lambda: fn(*inputs)


def _lowering(p: Program, inputs: tuple) -> Callable[[], Any]:
    import lowering

    fn = lowering.compile(p.fn)

    def run():
        return fn(*inputs)

    run.compiled = fn
    return run


_NUMBA: dict[str, Callable] = {}  # program name -> its dispatcher


def _numba(p: Program, inputs: tuple) -> Callable[[], Any]:
    import numba

    # (compile-time advice, e.g. `@` of strided views, is not the benchmark's business)
    warnings.filterwarnings("ignore", category=numba.NumbaPerformanceWarning)
    if p.name not in _NUMBA:
        if p.numba == "same":
            _NUMBA[p.name] = numba.njit(_with_jitted_helpers(p.fn))
        else:
            _NUMBA[p.name] = DOMAINS[p.domain].numba_variants()[p.name]
    fn = _NUMBA[p.name]
    return lambda: fn(*inputs)


def _with_jitted_helpers(fn: FunctionType) -> FunctionType:
    """fn with the plain functions of its own module that it calls by name
    replaced by their `njit` (numba cannot call a Python function)."""
    import numba

    names = dict(fn.__globals__)
    for name in fn.__code__.co_names:
        g = names.get(name)
        if isinstance(g, FunctionType) and g.__module__ == fn.__module__:
            names[name] = numba.njit(g)
    return FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__, fn.__closure__)


def _jax(p: Program, inputs: tuple) -> Callable[[], Any]:
    import jax

    jax.config.update("jax_enable_x64", True)
    variants = DOMAINS[p.domain].jax_variants()
    if p.name not in variants:
        raise NotExpressible(f"no jax.numpy version of {p.name}")
    static = tuple(i for i, a in enumerate(inputs) if isinstance(a, int))
    fn = jax.jit(variants[p.name], static_argnums=static)
    args = [jax.device_put(a) if isinstance(a, np.ndarray) else a for a in inputs]

    return lambda: jax.block_until_ready(fn(*args))
