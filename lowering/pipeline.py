"""The explicit, ordered pipeline: capture's module through the tensor-level
passes to a backend program. `python -m lowering.dump --passes` prints it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from .config import config, logger


def context() -> Context:
    from xdsl.dialects import arith, func, math
    from xdsl.dialects.builtin import Builtin

    from xdsl.dialects import affine, memref

    from dialects.array import Array
    from dialects.kernel import Kernel
    from dialects.loop import Loop

    ctx = Context()
    for d in (Builtin, func.Func, arith.Arith, math.Math, affine.Affine, memref.MemRef, Array, Loop,
              Kernel):
        ctx.load_dialect(d)
    return ctx


def tensor_passes() -> list[ModulePass]:
    from passes.canonicalize import ArrayCanonicalize
    from passes.decompose import Decompose
    from passes.strength_reduce import StrengthReduce
    from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
    from xdsl.transforms.dead_code_elimination import DeadCodeElimination

    return [ArrayCanonicalize(), Decompose(), StrengthReduce(), CommonSubexpressionElimination(),
            DeadCodeElimination()]


def run_passes(module: ModuleOp, passes: list[ModulePass] | None = None,
               after_each: Callable[[ModulePass, ModuleOp, float], None] | None = None) -> ModuleOp:
    ctx = context()
    for p in passes if passes is not None else tensor_passes():
        t0 = time.perf_counter()
        p.apply(ctx, module)
        dt = time.perf_counter() - t0
        if config.verify_each_pass:
            module.verify()
        logger("passes").debug("%s took %.2f ms", p.name, dt * 1e3)
        if after_each is not None:
            after_each(p, module, dt)
    return module


_PROGRAMS: dict[tuple, Callable] = {}
_PROGRAMS_LOCK = threading.Lock()  # lookups and insertions; compiling runs outside it
PROGRAM_CACHE_SIZE = 1024


def compile_segment(module: ModuleOp, backend: str = "numpy",
                    layouts: list[str] | None = None, key=None,
                    partition: tuple[str, float | None] = ("min_cut", None)) -> Callable:
    """Tensor passes, then the backend; programs are shared process-wide by
    (IR text, backend, input layouts). `layouts` gives each input's memory
    layout class ("C", "F", "strided"), which the CPU backend compiles for.
    A joint forward+backward function (from `grad`/`value_and_grad`/`vjp`) is
    first cut in two by `passes/remat.py` (`partition` = (strategy,
    memory_budget)) and runs as a forward then a backward program."""
    cache_key = (key if key is not None else str(module), backend, tuple(layouts or ()),
                 partition)
    with _PROGRAMS_LOCK:
        prog = _PROGRAMS.get(cache_key)
    if prog is None:
        from passes.remat import has_backward

        if has_backward(module):
            prog = PartitionedProgram(module, backend, layouts, partition, cache_key[0])
        else:
            prog = _compile_segment(module, backend, layouts)
        with _PROGRAMS_LOCK:
            first = _PROGRAMS.get(cache_key)
            if first is not None:  # another thread compiled it meanwhile: share its program
                return first
            if len(_PROGRAMS) >= PROGRAM_CACHE_SIZE:
                _PROGRAMS.pop(next(iter(_PROGRAMS)))
            _PROGRAMS[cache_key] = prog
    return prog


def _compile_segment(module: ModuleOp, backend: str, layouts: list[str] | None) -> Callable:
    module = module.clone()
    run_passes(module)
    if backend == "numpy":
        from .backends.numpy_backend import compile_module

        return compile_module(module)
    if backend == "cpu":
        from .backends.cpu_backend import compile_module as compile_cpu

        n = len(next(iter(module.ops)).body.blocks[0].args)  # type: ignore[attr-defined]
        return compile_cpu(module, layouts or ["C"] * n)
    raise ValueError(f"unknown backend {backend!r}")


class PartitionedProgram:
    """A joint function run as two programs: the forward computes its results
    and the saved values, the backward the rest from the inputs and the saved
    values (compiled on first use, for the saved values' layouts)."""

    def __init__(self, module: ModuleOp, backend: str, layouts: list[str] | None,
                 partition: tuple[str, float | None], key):
        from passes.remat import partition as cut

        # the halves are cached under the joint function's key (no re-printing)
        self.key = (key, "partition", partition)
        self.backend = backend
        self.layouts = list(layouts or [])
        self.partition = cut(module.clone(), partition[0], partition[1])
        assert self.partition is not None
        self.forward = compile_segment(self.partition.forward, backend, self.layouts,
                                       self.key + ("forward",))
        self._backward: dict[tuple, Callable] = {}
        self._backward_lock = threading.Lock()  # one compile per layout, whichever thread asks
        self.n_results = len(self.partition.fwd_results) + len(self.partition.bwd_results)
        self.programs: list[Callable] = [self.forward]
        self.fresh: tuple[bool, ...] | None = None  # known once the backward is compiled

    def backward_for(self, saved: list) -> Callable:
        from runtime.guards import layout_class

        import numpy as np

        lay = tuple(layout_class(x) if isinstance(x, np.ndarray) else "C" for x in saved)
        prog = self._backward.get(lay)
        if prog is None:
            with self._backward_lock:
                prog = self._backward.get(lay)
                if prog is None:
                    prog = self._compile_backward(lay)
        return prog

    def _compile_backward(self, lay: tuple) -> Callable:
        prog = compile_segment(self.partition.backward, self.backend,
                               self.layouts + list(lay), self.key + ("backward",))
        # (published last: a thread that finds it in `_backward` finds `fresh` set)
        self.programs = [self.forward, prog]
        # one backward layout so far: its results' freshness holds for every call
        self.fresh = self._fresh(prog) if not self._backward else None
        self._backward[lay] = prog
        return prog

    def _fresh(self, bwd: Callable) -> tuple[bool, ...] | None:
        """Results the two programs allocate in the call (see fresh_results)."""
        ff, bf = getattr(self.forward, "fresh", None), getattr(bwd, "fresh", None)
        if ff is None or bf is None:
            return None
        p = self.partition
        out = [False] * self.n_results
        for i, f in zip(p.fwd_results, ff[:len(p.fwd_results)]):
            out[i] = f
        for i, f in zip(p.bwd_results, bf):
            out[i] = f
        return tuple(out)

    def __call__(self, inputs):
        p = self.partition
        nf = len(p.fwd_results)
        fres = self.forward(inputs)
        saved = list(fres[nf:])
        bres = self.backward_for(saved)(list(inputs) + saved)
        out: list = [None] * self.n_results
        for i, r in zip(p.fwd_results, fres[:nf]):
            out[i] = r
        for i, r in zip(p.bwd_results, bres):
            out[i] = r
        return out
