"""Our dialects and passes as an xDSL `Universe`, so that xDSL's own tools see
them: after `pip install -e .` the `xdsl.universe` entry point in
pyproject.toml makes

    python -m lowering.dump model.py::f --args "f32[8,16]" > f.mlir
    xdsl-opt -p decompose,array-canonicalize f.mlir

parse a dumped graph and run one of our passes on it.

Both tables are discovered, not listed: every `Dialect` defined in a module of
the `dialects` package and every named `ModulePass` defined in a module of the
`passes` package is registered under its own name, so a new pass file is
reachable from `xdsl-opt -p` without touching this file."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from types import ModuleType

from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.universe import Universe


def _modules(package: str) -> list[ModuleType]:
    pkg = importlib.import_module(package)
    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.ispkg)
    return [importlib.import_module(f"{package}.{n}") for n in names]


def dialects() -> dict[str, Dialect]:
    """Dialect name -> Dialect, for every dialect our `dialects` package defines."""
    out: dict[str, Dialect] = {}
    for mod in _modules("dialects"):
        for obj in vars(mod).values():
            if isinstance(obj, Dialect):
                out[obj.name] = obj
    return out


def pass_classes() -> dict[str, type[ModulePass]]:
    """Pass name -> class, for every pass defined in our `passes` package (not
    the upstream passes our pipeline also uses, which xDSL registers itself)."""
    out: dict[str, type[ModulePass]] = {}
    for mod in _modules("passes"):
        for obj in vars(mod).values():
            if (isinstance(obj, type) and issubclass(obj, ModulePass)
                    and obj.__module__ == mod.__name__
                    and isinstance(getattr(obj, "name", None), str)):
                if obj.name in out:
                    raise ValueError(f"two passes are named {obj.name!r}: "
                                     f"{out[obj.name].__module__} and {obj.__module__}")
                out[obj.name] = obj
    return out


def _const(value):
    def get():
        return value

    return get


def _universe() -> Universe:
    ds: dict[str, Callable[[], Dialect]] = {n: _const(d) for n, d in dialects().items()}
    ps: dict[str, Callable[[], type[ModulePass]]] = {
        n: _const(p) for n, p in pass_classes().items()
    }
    return Universe(all_dialects=ds, all_passes=ps)


LOWERING_UNIVERSE = _universe()
