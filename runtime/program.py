"""A straight-line program of Python callables over value slots: what the numpy
reference backend compiles a function to."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from . import errors


@dataclass
class Program:
    n_inputs: int
    n_slots: int
    steps: list[tuple[Callable, tuple[int, ...], int]]
    outputs: tuple[int, ...]

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run the steps; every numpy call's floating-point flags go to one
        collector (numpy's own detection, as its errstate would see them) and
        raise FloatingPointFlags where the caller's errstate acts on them."""
        vals: list = list(inputs) + [None] * (self.n_slots - len(inputs))
        collector = errors.Collector()  # one per call: calls may run in several threads
        token = collector.enter()
        try:
            for fn, ins, out in self.steps:
                vals[out] = fn(*[vals[i] for i in ins])
        finally:
            collector.exit(token)
        if collector.bits:
            errors.check(collector.bits)
        return [vals[i] for i in self.outputs]
