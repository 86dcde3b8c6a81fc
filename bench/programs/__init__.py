"""Real numpy programs, the way researchers write them (loops over rows,
preallocated outputs, slicing, in-place updates, `@`), across six domains;
`python -m bench --programs` runs them on numpy, lowering, numba and jax
(see bench/README.md). `PROGRAMS` is the registry, in table order."""

from __future__ import annotations

from types import ModuleType

from . import dynprog, linalg, ml, physics, signal, stencils
from .base import SIZES, Program

DOMAINS: dict[str, ModuleType] = {
    "linalg": linalg,
    "stencils": stencils,
    "physics": physics,
    "ml": ml,
    "signal": signal,
    "dynprog": dynprog,
}


def _registry() -> dict[str, Program]:
    out: dict[str, Program] = {}
    for domain, module in DOMAINS.items():
        for p in module.PROGRAMS:
            assert p.name not in out, f"two programs named {p.name}"
            out[p.name] = Program(**{**p.__dict__, "domain": domain})
    return out


PROGRAMS: dict[str, Program] = _registry()

__all__ = ["DOMAINS", "PROGRAMS", "SIZES", "Program"]
