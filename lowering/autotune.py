"""`mode="max-autotune"` on the CPU: a program's candidate configurations
compiled and timed on the first call's arguments, the fastest kept.

A candidate is one way of lowering the whole segment (`Candidate`): the
cost model's choices as shipped, every generated-vs-library choice forced
to one side (the row strategy of a matmul-shaped program: one pass over a
matrix's rows, BLAS, the narrow kernel), one thread instead of the pool,
vectors of half the host's width. Candidates whose kernel level (and vector
width) come out the same as an earlier one's are one program, timed once.
Each is timed on copies of the arguments (a program that writes an argument
in place writes the copy) with numpy's floating-point reports off, and
the fastest median wins; a candidate that fails to compile or run is
dropped (the shipped configuration is never dropped: its failure is the
program's).

The winner's name is kept in the on-disk cache (`tune_key`: the segment's
structural key, layouts, partition, flags, the compiler's and the host's
environment, the candidates' names): a later process compiling the same
segment on the same kind of host compiles that candidate alone and times
nothing. `explain` shows the chosen candidate and every candidate's time
(`Tuning.lines`).

A candidate that forces the cost model's choices does so process-wide
(`cost_model.forced`) while it compiles: a compile in another thread at
that moment may take the same forced choices and keep them under its
unforced key (a slower program for that key, never a wrong one)."""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import numpy as np

from passes import cost_model
from runtime import cpu

# the time budget of one candidate's timing runs (seconds) and its run counts
TIME_BUDGET_S = 0.2
MIN_RUNS, MAX_RUNS = 3, 50


@dataclass(frozen=True)
class Candidate:
    """One configuration of the CPU lowering."""
    name: str
    threads: int | None = None  # None: the pool's (runtime.cpu.THREADS)
    vector_bits: int | None = None  # None: the host's
    forced: str | None = None  # every cost-model choice forced to "generated"/"library"

    @contextmanager
    def applied(self) -> Iterator[None]:
        with ExitStack() as stack:
            if self.vector_bits is not None:
                stack.enter_context(cpu.vector_width(self.vector_bits))
            if self.forced is not None:
                stack.enter_context(cost_model.forced(
                    {c: self.forced for c in cost_model.CLASSES}))
            yield


def candidates() -> list[Candidate]:
    """The configurations tried, the shipped one first."""
    out = [Candidate("shipped"), Candidate("generated kernels", forced="generated"),
           Candidate("library routines", forced="library")]
    if cpu.THREADS > 1:
        out.append(Candidate("one thread", threads=1))
    bits = cpu.vector_bits()
    if bits > 128:
        out.append(Candidate(f"{bits // 2}-bit vectors", vector_bits=bits // 2))
    return out


@dataclass
class Tuning:
    """What max-autotune did for one program: the chosen candidate and each
    candidate's median time (us; None: not timed, the same program as the
    one named in `same_as`)."""
    chosen: str
    times: dict[str, float | None] = field(default_factory=dict)
    same_as: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    from_disk: bool = False

    def lines(self) -> list[str]:
        if self.from_disk:
            return [f"max-autotune: {self.chosen} (timed in an earlier run, read from the "
                    f"on-disk cache)"]
        parts = []
        for name, t in self.times.items():
            if t is not None:
                parts.append(f"{name} {t:.1f} us")
            elif name in self.same_as:
                parts.append(f"{name} = {self.same_as[name]}")
        parts += [f"{name} failed ({why})" for name, why in self.failed.items()]
        return [f"max-autotune: {self.chosen} chosen; candidates: " + ", ".join(parts)]


def time_program(prog: Callable, inputs: list) -> float:
    """Median microseconds of prog on copies of `inputs` (one warm-up run)."""
    args = [np.array(x, copy=True, order="K") if isinstance(x, np.ndarray) else x
            for x in inputs]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog(args)
        runs: list[float] = []
        start = time.perf_counter()
        while len(runs) < MAX_RUNS and (len(runs) < MIN_RUNS
                                        or time.perf_counter() - start < TIME_BUDGET_S):
            t0 = time.perf_counter()
            prog(args)
            runs.append(time.perf_counter() - t0)
    return statistics.median(runs) * 1e6


def tune_key(key, cands: list[Candidate]) -> str:
    from runtime import disk_cache

    from .backends import cpu_cache

    return disk_cache.digest({"kind": "cpu-tune", "ir": repr(key.ir), "layouts": list(key.layouts),
                              "partition": list(key.partition), "flags": list(key.flags),
                              "costs": key.costs, "environment": cpu_cache.environment(),
                              "threads": cpu.THREADS, "candidates": [c.name for c in cands]})


def tune(build: Callable[[Candidate], tuple[str, Callable]], inputs: list, key) -> Callable:
    """The fastest candidate's program; `build(c)` lowers and compiles the
    segment as candidate `c` says: (its kernel level's text, the program)."""
    from .backends import cpu_cache

    cands = candidates()
    cache = cpu_cache.cache()  # (None: off, or suspended by clear_programs)
    dkey = tune_key(key, cands)
    hit = cache.get(dkey) if cache is not None else None
    if hit is not None:
        chosen = next((c for c in cands if c.name == hit.meta.get("chosen")), None)
        if chosen is not None:
            _, prog = build(chosen)
            return _mark(prog, Tuning(chosen.name, from_disk=True))
    tuning = Tuning(cands[0].name)
    seen: dict[str, str] = {}  # kernel level (and vector width) -> the first candidate's name
    progs: dict[str, Callable] = {}
    for c in cands:
        try:
            text, prog = build(c)
            text = f"{c.vector_bits or cpu.vector_bits()}:{c.threads}\n{text}"
            if text in seen:
                tuning.times[c.name] = None
                tuning.same_as[c.name] = seen[text]
                continue
            seen[text] = c.name
            tuning.times[c.name] = time_program(prog, inputs)
            progs[c.name] = prog
        except Exception as e:
            if c is cands[0]:
                raise
            tuning.failed[c.name] = f"{type(e).__name__}: {e}"[:120]
    timed = {n: t for n, t in tuning.times.items() if t is not None}
    tuning.chosen = min(timed, key=timed.__getitem__)
    if cache is not None:
        cache.put(dkey, {"kind": "cpu-tune", "chosen": tuning.chosen,
                         "times": {n: t for n, t in tuning.times.items()}}, b"")
    return _mark(progs[tuning.chosen], tuning)


def _mark(prog: Callable, tuning: Tuning) -> Callable:
    try:
        prog.tuning = tuning
    except AttributeError:
        pass
    return prog
