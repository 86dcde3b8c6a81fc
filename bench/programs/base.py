"""What a benchmark program is: a plain numpy function, an input builder
with its sizes, and what each peer runs instead of the function itself."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

SIZES = ("T", "S", "M")  # tiny (the tests), small (~0.1–1 ms in numpy), medium (~5–50 ms)


@dataclass(frozen=True)
class Program:
    name: str
    what: str  # one line for the tables
    fn: Callable  # the numpy program, as written; never mutates its arguments
    build: Callable[..., tuple]  # build(*sizes[size]) -> the arguments, from a fixed seed
    sizes: Mapping[str, tuple]  # "T", "S", "M" -> build's arguments
    # "same": numba.njit of `fn` itself; "loops": a variant with explicit
    # loops, `numba_variants()[name]` of the program's module
    numba: str = "same"
    # peer -> why it cannot express the program (bench.peers.NotExpressible)
    not_expressible: Mapping[str, str] = field(default_factory=dict)
    domain: str = ""  # filled in by the registry from the program's module

    def inputs(self, size: str) -> tuple:
        return self.build(*self.sizes[size])


def rng(salt: int = 0) -> np.random.Generator:
    """The fixed-seed generator every builder draws from."""
    return np.random.default_rng(20250101 + salt)
