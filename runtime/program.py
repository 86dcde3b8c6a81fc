"""A straight-line program of Python callables over value slots: what the numpy
reference backend compiles a function to."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

from . import errors


@runtime_checkable
class Compiled(Protocol):
    """What every backend's program is to the code that runs it: called with
    the segment's inputs, it returns its results; `fresh` says, per result,
    whether it is a buffer the call allocated (never an input's memory: it can
    be handed to the caller as it is), None where unknown; `report` is the
    lowering's report for `explain` (kernels and their fused ops), None where
    nothing was lowered; `kernel_bodies` the number of distinct kernel bodies
    its launches run (kernels that differ only in their parameters share one
    body, compiled once)."""

    fresh: tuple[bool, ...] | None
    report: object | None
    kernel_bodies: int

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]: ...


@dataclass
class Program:
    n_inputs: int
    n_slots: int
    steps: list[tuple[Callable, tuple[int, ...], int]]
    outputs: tuple[int, ...]
    fresh: ClassVar[None] = None  # (numpy decides which results are new arrays)
    report: ClassVar[None] = None
    kernel_bodies: ClassVar[int] = 0

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run the steps; every numpy call's floating-point flags go to one
        collector (numpy's own detection, as its errstate would see them) and
        raise FloatingPointFlags where the caller's errstate acts on them."""
        vals: list = list(inputs) + [None] * (self.n_slots - len(inputs))
        collector = errors.Collector()  # one per call: calls may run in several threads
        token = collector.enter()
        try:
            for fn, ins, out in self.steps:
                try:
                    vals[out] = fn(*[vals[i] for i in ins])
                except Exception as e:  # each step is a numpy call: its error is numpy's
                    raise errors.as_numpy(e)
        finally:
            collector.exit(token)
        if collector.bits:
            errors.check(collector.bits)
        return [vals[i] for i in self.outputs]
