"""A straight-line program of Python callables over value slots: what the numpy
reference backend compiles a function to."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class Program:
    n_inputs: int
    n_slots: int
    steps: list[tuple[Callable, tuple[int, ...], int]]
    outputs: tuple[int, ...]

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        vals: list = list(inputs) + [None] * (self.n_slots - len(inputs))
        with np.errstate(all="ignore"):
            for fn, ins, out in self.steps:
                vals[out] = fn(*[vals[i] for i in ins])
        return [vals[i] for i in self.outputs]
