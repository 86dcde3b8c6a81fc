"""Where arrays come from besides the arguments: globals and closure cells of
the function (and of the Python functions it reaches through them). They are
read at call time, never baked in; Python scalars found there are specialized
and guarded by value."""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

_SCALARS = (bool, int, float, str)


@dataclass
class GlobalSource:
    name: str
    get: Callable[[], Any]


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return names


def discover(fn: Callable, depth: int = 3) -> tuple[list[GlobalSource], list[GlobalSource]]:
    """(array sources, scalar sources) reachable from fn's globals/closures."""
    arrays: list[GlobalSource] = []
    scalars: list[GlobalSource] = []
    seen_fns: set[int] = set()
    seen_keys: set[tuple[int, str]] = set()

    def visit(f: Any, d: int) -> None:
        f = getattr(f, "__wrapped__", f)
        if not isinstance(f, types.FunctionType) or id(f) in seen_fns or d < 0:
            return
        mod = getattr(f, "__module__", "") or ""
        if mod.startswith(("numpy", "lowering", "dialects", "passes", "runtime")):
            return
        seen_fns.add(id(f))
        g = f.__globals__
        for name in sorted(_code_names(f.__code__)):
            if name not in g or (id(g), name) in seen_keys:
                continue
            seen_keys.add((id(g), name))
            v = g[name]
            label = f"{f.__module__}.{name}" if d < depth else name
            if isinstance(v, np.ndarray):
                arrays.append(GlobalSource(label, (lambda g=g, name=name: g[name])))
            elif isinstance(v, _SCALARS) or isinstance(v, np.generic):
                scalars.append(GlobalSource(label, (lambda g=g, name=name: g[name])))
            elif isinstance(v, types.FunctionType):
                visit(v, d - 1)
        for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if isinstance(v, np.ndarray):
                arrays.append(GlobalSource(f"<closure {name}>", (lambda cell=cell: cell.cell_contents)))
            elif isinstance(v, _SCALARS) or isinstance(v, np.generic):
                scalars.append(GlobalSource(f"<closure {name}>", (lambda cell=cell: cell.cell_contents)))
            elif isinstance(v, types.FunctionType):
                visit(v, d - 1)

    visit(fn, depth)
    return arrays, scalars
