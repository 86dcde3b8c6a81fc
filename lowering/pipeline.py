"""The one ordered pipeline, every level: capture's tensor-level module
through the tensor-level passes, then (per backend) the passes below the
tensor level, then the backend's emitter, to a program. Every stage but the
emitter's is a named xDSL `ModulePass` — the same objects `xdsl-opt -p` runs —
and this module owns their order; a backend contributes its emitter and
runtime and never imports the pipeline.

    tensor   keep-flags (ops not computed in full — unused, or read in part:
             a slice, an index, a gather — that can raise a floating-point
             category the caller's np.errstate acts on are kept for their
             flags over every element: passes/keep_flags.py), remat (a
             joint forward+backward function becomes @f_forward and
             @f_backward, the cut recorded on them: passes/remat.py; any other
             function passes through), canonicalize, decompose,
             strength-reduce, cse, batch-routines (independent calls of one
             numpy routine: one call on their stack), dce
    cpu      cover-products (products of windows of the same two matrices:
             one product over their cover, passes/cover_products.py),
             sink-concat (an element-wise op over a concatenation -- np.roll,
             np.concatenate -- becomes a concatenation of the op over its
             pieces: passes/sink_concat.py), annotate-layouts, lower-to-loop
             (tensor -> loop level, fusion),
             schedule (loop -> kernel level, cost model), share-kernels (kernels
             that differ only in constants and sizes read them as parameters)
             — on each half of a cut function by itself, the backward's once
             the layouts of its saved values are known (its first call); then
             the emitter: llvm-emit (LLVM IR, lowering/codegen: one function
             per distinct kernel body), llvm-jit (LLVM -O3 and MCJIT,
             runtime/cpu.py), memory-plan (the program's steps: buffers
             dropped after their last use, intermediates sharing
             program-owned buffers)
    numpy    the emitter only: each tensor op as its numpy call
    gpu      the cpu passes, then triton-emit: Triton source and launch plans
             from the kernel level (lowering/codegen/triton_kernel.py), the
             program's steps on a device (lowering/backends/gpu_backend.py)

`python -m lowering.dump --passes` prints it; `--print-between-passes` the IR
after every pass; `--time-passes` (and `LOWERING_LOGS=perf`) the time of
every stage."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import NamedTuple

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.transforms.dead_code_elimination import DeadCodeElimination

from dialects.context import context
from dialects.symbols import active as symbols_active
from passes import cost_model
from passes.batch_routines import BatchRoutines
from passes.canonicalize import ArrayCanonicalize
from passes.decompose import Decompose
from passes.keep_flags import KeepFlags
from passes.lower_to_loop import AnnotateLayouts, LowerToLoop, LoweringReport, source_locations
from passes.remat import Partition, Remat, read_cut
from passes.schedule import Schedule
from passes.share_kernels import ShareKernels
from passes.cover_products import CoverProducts
from passes.sink_concat import SinkConcat
from passes.strength_reduce import StrengthReduce
from runtime import cpu
from runtime.errors import reported_categories
from runtime.guards import layout_class

from . import autotune
from .codegen.triton_kernel import ORDERED_BLOCK
from .backends import cpu_cache, cpu_dynamic, numpy_backend
from .cost_tables import table_for_process
from .config import config, logger

# the cost table the lowering decides with: the user's calibrated one, if any
cost_model.set_default_loader(table_for_process)

__all__ = ["context", "cut_passes", "tensor_passes", "lower_passes", "pipeline", "run_passes",
           "tensor_stage", "lower_below", "lower", "emit", "compile_segment", "clear_programs",
           "ProgramKey", "EMITTERS", "LEVEL_AFTER", "DEFAULT_PARTITION", "flag_categories"]

BACKENDS = ("numpy", "cpu", "gpu")

# the emitter stages of each backend, in the order they run (not IR passes:
# they make a program), each timed by itself
EMITTERS: dict[str, tuple[tuple[str, str], ...]] = {
    "numpy": (("numpy-program", "lowering.backends.numpy_backend: each tensor op as its "
                                "numpy call"),),
    "cpu": (("llvm-emit", "lowering.codegen.llvm: kernel level -> LLVM IR"),
            ("llvm-jit", "runtime.cpu: LLVM's -O3 and MCJIT"),
            ("memory-plan", "lowering.backends.cpu_backend: the program's steps over buffer "
                            "slots, then liveness and buffer reuse")),
    "gpu": (("triton-emit", "lowering.codegen.triton_kernel: kernel level -> Triton source, "
                            "one @triton.jit function and launch plan per kernel; "
                            "lowering.backends.gpu_backend: the program's steps on the device"),),
}

# (strategy, memory_budget) of the forward/backward cut, when nobody chose one
DEFAULT_PARTITION: tuple[str, float | None] = ("min_cut", None)

# the level whose IR a pass leaves (for `lowering.dump --stage`)
LEVEL_AFTER = {"lower-to-loop": "loop", "schedule": "kernel", "share-kernels": "kernel"}


# a GPU reduces a big array to a scalar in up to this many programs (then
# one more for their partial results), from this many elements on; the CPU
# splits it across its threads, from the parallel threshold on
GPU_REDUCTIONS = {"reduction_chunks": 1024, "split_threshold": 1 << 16}
# a GPU's column reduction (a bias gradient) in chunks of rows, for this
# many programs of the Triton emitter's ordered block of columns each: one
# program per block of columns walking every row kept 32 multiprocessors busy
# on a 4096x4096 column sum
GPU_COLUMN_SPLIT = (ORDERED_BLOCK, 1024)


def flag_categories(backend: str) -> tuple[str, ...]:
    """The floating-point categories a program compiled now for `backend`
    keeps unused ops for: those the calling thread's `np.errstate` does not
    ignore (none on a GPU, which reports no flags)."""
    return () if backend == "gpu" else reported_categories()


def cut_passes(partition: tuple[str, float | None] = DEFAULT_PARTITION,
               flags: tuple[str, ...] | None = None) -> list[ModulePass]:
    """The first tensor-level stages: unused ops kept for their
    floating-point flags where `flags` (categories; default: the current
    errstate's) say so, then the forward/backward cut of a joint function,
    `partition` = (strategy, memory_budget). They run before the tensor
    passes because they read the marks capture left on ops (`bwd` on the
    backward's, `remat` on checkpointed ones), which their rewrites do not
    keep."""
    return [KeepFlags(reported_categories() if flags is None else tuple(flags)),
            Remat(partition[0], partition[1])]


def tensor_passes() -> list[ModulePass]:
    return [ArrayCanonicalize(), Decompose(), StrengthReduce(), CommonSubexpressionElimination(),
            BatchRoutines(), DeadCodeElimination()]


def lower_passes(backend: str, layouts: list[str] | tuple[str, ...] = (),
                 threads: int | None = None) -> list[ModulePass]:
    """The passes below the tensor level for `backend`; `layouts` gives each
    input's memory layout class ("C", "F", "strided"), which the CPU backend
    compiles its loads for; `threads` the threads a kernel's domain is split
    over (default the pool's: runtime.cpu.THREADS)."""
    if backend == "numpy":
        return []
    threads = cpu.THREADS if threads is None else threads
    if backend in ("cpu", "gpu"):  # (gpu: the same kernel level, emitted as Triton)
        return [CoverProducts(), SinkConcat(half_kernels=backend == "gpu"),
                AnnotateLayouts(tuple(layouts)),
                LowerToLoop(shared_rows=backend == "cpu", half_kernels=backend == "gpu",
                            numpy_loops=backend == "cpu", in_place_args=backend == "cpu",
                            threads=threads,
                            parallel_threshold=cpu.parallel_threshold(),
                            column_split=GPU_COLUMN_SPLIT if backend == "gpu" else (0, 0)),
                Schedule(vector_bits=cpu.vector_bits(), threads=threads,
                         parallel_threshold=cpu.parallel_threshold(),
                         **(GPU_REDUCTIONS if backend == "gpu" else {})), ShareKernels()]
    raise ValueError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")


def pipeline(backend: str, layouts: list[str] | tuple[str, ...] = (),
             partition: tuple[str, float | None] = DEFAULT_PARTITION,
             flags: tuple[str, ...] | None = None) -> list[ModulePass]:
    """Every pass a segment runs for `backend`, in order (the passes below
    the tensor level run on each half of a cut function); `flags`: the
    categories unused ops are kept for (default: `flag_categories`)."""
    flags = flag_categories(backend) if flags is None else flags
    return cut_passes(partition, flags) + tensor_passes() + lower_passes(backend, layouts)


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
        logger("perf").debug("stage %s: %.2f ms", p.name, dt * 1e3)
        if after_each is not None:
            after_each(p, module, dt)
    return module


def tensor_stage(module: ModuleOp, partition: tuple[str, float | None] = DEFAULT_PARTITION,
                 after_each: Callable[[ModulePass, ModuleOp, float], None] | None = None,
                 flags: tuple[str, ...] | None = None) -> ModuleOp:
    """A copy of `module` through the tensor-level passes: unused ops kept
    for their flags (`flags`, default the current errstate's categories),
    the cut (which leaves @main_forward and @main_backward where @main is a
    joint function, `read_cut` finds them), then the tensor passes."""
    return run_passes(module.clone(), cut_passes(partition, flags) + tensor_passes(), after_each)


def lower_below(module: ModuleOp, backend: str, layouts: list[str] | tuple[str, ...] = (),
                after_each: Callable[[ModulePass, ModuleOp, float], None] | None = None,
                threads: int | None = None) -> tuple[ModuleOp, LoweringReport | None]:
    """`module` (one function, through the tensor-level passes) through the
    passes below the tensor level, in place: the module at the backend's
    last level and the lowering's report (None where nothing is lowered
    below the tensor level)."""
    passes = lower_passes(backend, layouts, threads)
    run_passes(module, passes, after_each)
    reports = [r for p in passes if isinstance(p, LowerToLoop) for r in p.reports]
    return module, (reports[0] if reports else None)


def lower(module: ModuleOp, backend: str, layouts: list[str] | tuple[str, ...] = (),
          after_each: Callable[[ModulePass, ModuleOp, float], None] | None = None
          ) -> tuple[ModuleOp, LoweringReport | None]:
    """A copy of one function through the tensor passes and the passes below,
    uncut: a joint function is lowered whole, as one function (what
    `lowering.dump --stage kernel|llvm` prints and process replay records);
    its unused ops kept for the flags the current errstate acts on."""
    passes = [KeepFlags(flag_categories(backend))] + tensor_passes()
    return lower_below(run_passes(module.clone(), passes, after_each), backend, layouts,
                       after_each)


@contextmanager
def _timed(name: str, after: Callable[[str, float], None] | None = None) -> Iterator[None]:
    """One emitter stage, timed (`LOWERING_LOGS=perf`; `after(name, seconds)`)."""
    t0 = time.perf_counter()
    yield
    dt = time.perf_counter() - t0
    logger("perf").debug("stage %s: %.2f ms", name, dt * 1e3)
    if after is not None:
        after(name, dt)


def emit(module: ModuleOp, backend: str, report: LoweringReport | None,
         after_each: Callable[[str, float], None] | None = None, reuse: bool = True) -> Callable:
    """The backend's emitter, its stages (EMITTERS) timed each: the program
    for a module at its last level (`reuse` False: no kernel body compiled
    before in this process is reused, so that every stage runs)."""
    stage = partial(_timed, after=after_each)
    if backend == "numpy":
        with stage("numpy-program"):
            return numpy_backend.compile_module(module)
    if backend == "gpu":
        from .backends import gpu_backend  # (triton and the device libraries: on use only)

        return gpu_backend.build(module, report, stage)
    return cpu_dynamic.build(module, report, stage, reuse)


class ProgramKey(NamedTuple):
    """What a compiled program depends on: the segment's IR (its structural
    key, or its text), the backend, each input's layout class, and the
    forward/backward partition of a joint function, the cost table that
    chose between generated kernels and library routines, (GPU) the
    compile mode: a program keeps state per mode (max-autotune's timed
    launch configurations), which functions of another mode must not share,
    and the floating-point categories its unused ops are kept for
    (`flag_categories`: the errstate's when it was compiled)."""
    ir: object
    backend: str
    layouts: tuple[str, ...]
    partition: tuple
    costs: str = ""
    mode: str = ""
    flags: tuple[str, ...] = ()


# the one program cache, process-wide: functions, segments and graph-break
# variants with the same key share one program
_PROGRAMS: dict[ProgramKey, Callable] = {}
_PROGRAMS_LOCK = threading.Lock()  # lookups and insertions; compiling runs outside it
PROGRAM_CACHE_SIZE = 1024


def clear_programs() -> None:
    """Forget every compiled program (the next call of each segment compiles
    again): for tests that change a compile-time setting."""
    with _PROGRAMS_LOCK:
        _PROGRAMS.clear()
    cpu_cache.suspend()  # (nor from disk: the setting changed may not be in its key)


def compile_segment(module: ModuleOp, backend: str = "numpy",
                    layouts: list[str] | None = None, key=None,
                    partition: tuple[str, float | None] = DEFAULT_PARTITION,
                    mode: str = "default", inputs: list | None = None) -> Callable:
    """The pipeline, then the backend's emitter; programs are shared
    process-wide by `ProgramKey` (`key` names the IR: its structural key;
    default its text; `mode`, the compiled function's, keeps GPU programs of
    different modes apart; a CPU program compiled for "max-autotune" is
    tuned on `inputs`, its first call's: lowering/autotune.py). A joint
    forward+backward function (from
    `grad`/`value_and_grad`/`vjp`) comes out of the `remat` stage cut in two
    (`partition` = (strategy, memory_budget)) and runs as a forward then a
    backward program."""
    cache_key = ProgramKey(key if key is not None else str(module), backend,
                           tuple(layouts or ()), tuple(partition),
                           cost_model.digest() if backend == "cpu" else "",
                           _mode_key(backend, mode), flag_categories(backend))
    with _PROGRAMS_LOCK:
        prog = _PROGRAMS.get(cache_key)
    env = symbols_active()
    if prog is not None and env is not None:
        # the decisions its compile took on size symbols are this compile's
        # too (`dialects.symbols`: a symbolic key names the same symbols)
        for rel in getattr(prog, "relations", ()):
            env.record(rel)
    if prog is None:
        t0 = time.perf_counter()
        before = set(env.relations) if env is not None else set()
        tuned = backend == "cpu" and mode == "max-autotune" and inputs is not None
        prog = _compile(module, backend, list(layouts or ()), partition, cache_key,
                        cache_key.flags, inputs if tuned else None)
        if env is not None:
            try:
                prog.relations = [r for r in env.relations if r not in before]
            except AttributeError:  # (a program that keeps no attributes: not shared)
                return prog
        logger("perf").debug("compile (%s): %.2f ms", backend, (time.perf_counter() - t0) * 1e3)
        with _PROGRAMS_LOCK:
            first = _PROGRAMS.get(cache_key)
            if first is not None:  # another thread compiled it meanwhile: share its program
                return first
            if len(_PROGRAMS) >= PROGRAM_CACHE_SIZE:
                _PROGRAMS.pop(next(iter(_PROGRAMS)))
            _PROGRAMS[cache_key] = prog
    return prog


def _mode_key(backend: str, mode: str) -> str:
    """The part of a program's key its compile mode is: every GPU mode keeps
    programs of its own; on the CPU only max-autotune's are other programs."""
    return mode if backend == "gpu" or mode == "max-autotune" else ""


def _compile(module: ModuleOp, backend: str, layouts: list[str],
             partition: tuple[str, float | None], key: ProgramKey | None = None,
             flags: tuple[str, ...] = (), tune_inputs: list | None = None) -> Callable:
    """The program of one segment: from the on-disk cache (a CPU program
    compiled before, in any process: backends/cpu_cache.py), or the
    tensor-level passes, then, for each function they leave, the passes
    below and the emitter (`tune_inputs`: max-autotune's candidates of
    the whole segment, timed on them)."""
    disk = None
    if tune_inputs is not None and key is not None:
        tensor = tensor_stage(module, partition, flags=flags)
        cut = read_cut(tensor)
        if cut is not None:  # (a training step's halves: not tuned)
            return PartitionedProgram(cut, backend, layouts, source_locations(module))
        return autotune.tune(partial(_candidate, tensor, backend, layouts), tune_inputs, key)
    if backend == "cpu" and key is not None:
        disk = cpu_cache.find(module, key.ir, key.layouts, key.partition,
                              pipeline(backend, key.layouts, partition, flags))
        if disk is not None and disk.program is not None:
            return disk.program
    tensor = tensor_stage(module, partition, flags=flags)
    cut = read_cut(tensor)
    if cut is not None:  # (its halves are compiled in this process)
        return PartitionedProgram(cut, backend, layouts, source_locations(module))
    final, report = lower_below(tensor, backend, layouts)
    if report is not None:  # (what explain reads the report's lines against)
        report.locations = source_locations(module)
    if disk is None:
        return emit(final, backend, report)
    return disk.build(final, report, partial(_timed, after=None))


def _candidate(tensor: ModuleOp, backend: str, layouts: list[str],
               c: autotune.Candidate) -> tuple[str, Callable]:
    """One max-autotune candidate's program of a segment at the tensor
    level: (its kernel level's text, the program)."""
    with c.applied():
        final, report = lower_below(tensor.clone(), backend, layouts, threads=c.threads)
        return str(final), emit(final, backend, report)


class PartitionedProgram:
    """A joint function run as two programs, the halves of the cut the
    `remat` stage left (`partition`): the forward computes its results and
    the saved values, the backward the rest from the inputs and the saved
    values (lowered and compiled on first use, for the saved values'
    layouts)."""

    def __init__(self, partition: Partition, backend: str, layouts: list[str],
                 locations: list[str] | None = None):
        self.partition = partition  # its report is what `explain` shows
        self.backend = backend
        self.layouts = layouts
        self.locations = locations or []  # (the captured module's: its halves' reports')
        final, report = lower_below(partition.forward.clone(), backend, layouts)
        if report is not None:
            report.locations = self.locations
        self.forward = emit(final, backend, report)
        self._backward: dict[tuple, Callable] = {}
        self._backward_lock = threading.Lock()  # one compile per layout, whichever thread asks
        self.n_results = len(partition.fwd_results) + len(partition.bwd_results)
        self.programs: list[Callable] = [self.forward]
        self.fresh: tuple[bool, ...] | None = None  # known once the backward is compiled
        self.outputs: tuple[int, ...] = ()  # each result's slot in a captured graph's buffers
        self.report = None  # (each half has its own: `programs`)

    @property
    def input_types(self) -> list:
        return self.forward.input_types

    def backward_for(self, saved: list) -> Callable:
        return self.backward_for_layouts(
            tuple(layout_class(x) if isinstance(x, np.ndarray) else "C" for x in saved))

    def backward_for_layouts(self, lay: tuple) -> Callable:
        prog = self._backward.get(lay)
        if prog is None:
            with self._backward_lock:
                prog = self._backward.get(lay)
                if prog is None:
                    prog = self._compile_backward(lay)
        return prog

    def _compile_backward(self, lay: tuple) -> Callable:
        t0 = time.perf_counter()
        final, report = lower_below(self.partition.backward.clone(), self.backend,
                                    self.layouts + list(lay))
        if report is not None:
            report.locations = self.locations
        prog = emit(final, self.backend, report)
        logger("perf").debug("compile (%s): %.2f ms", self.backend,
                             (time.perf_counter() - t0) * 1e3)
        # (published last: a thread that finds it in `_backward` finds `fresh` set)
        self.programs = [self.forward, prog]
        # one backward layout so far: its results' freshness holds for every call
        self.fresh = self._fresh(prog) if not self._backward else None
        self._backward[lay] = prog
        return prog
    def _fresh(self, bwd: Callable) -> tuple[bool, ...] | None:
        """Results the two programs allocate in the call (see fresh_results)."""
        return self._fresh_of(self.forward.fresh, bwd.fresh)

    def _fresh_of(self, ff, bf) -> tuple[bool, ...] | None:
        if ff is None or bf is None:
            return None
        p = self.partition
        out = [False] * self.n_results
        for i, f in zip(p.fwd_results, ff[:len(p.fwd_results)]):
            out[i] = f
        for i, f in zip(p.bwd_results, bf):
            out[i] = f
        return tuple(out)

    @property
    def kernel_bodies(self) -> int:
        return sum(p.kernel_bodies for p in self.programs)

    def __call__(self, inputs):
        p = self.partition
        nf = len(p.fwd_results)
        fres = self.forward(inputs)
        saved = list(fres[nf:])
        bres = self.backward_for(saved)(list(inputs) + saved)
        return self._results(fres[:nf], bres)

    def _results(self, fres, bres) -> list:
        p = self.partition
        out: list = [None] * self.n_results
        for i, r in zip(p.fwd_results, fres):
            out[i] = r
        for i, r in zip(p.bwd_results, bres):
            out[i] = r
        return out

    # ---- on device arrays (backend="gpu": both halves GPU programs) ----
    def run_device(self, arrays, device=None) -> list:
        """Both halves on device arrays: the forward's saved values stay on
        the device and the backward (compiled for their layouts) reads them
        there; a training step on torch tensors never goes through the host."""
        from runtime.gpu import layout_class_of

        if not hasattr(self.forward, "run_device"):
            raise TypeError("run_device: not a GPU program")
        nf = len(self.partition.fwd_results)
        fres = self.forward.run_device(arrays, device)
        saved = list(fres[nf:])
        bwd = self.backward_for_layouts(tuple(layout_class_of(x) for x in saved))
        bres = bwd.run_device(list(arrays) + saved, device)
        self._device_fresh = self._fresh_of(self.forward.device_fresh, bwd.device_fresh)
        return self._results(fres[:nf], bres)

    @property
    def device_fresh(self):
        """Which results the last device run allocated for themselves alone
        (a backward result that is a saved value is not: it is copied)."""
        return getattr(self, "_device_fresh", None)

    @property
    def inputs_written(self) -> tuple:
        """The caller's arguments either half writes in place."""
        n = getattr(self.forward, "n_inputs", 0)
        return tuple(sorted({s for q in self.programs for s in getattr(q, "inputs_written", ())
                             if s < n}))

    @property
    def checks_indices(self) -> bool:
        return any(getattr(q, "checks_indices", False) for q in self.programs)

    def graph_why(self) -> str:
        """Why the step cannot be one graph ("" where it can): either half's."""
        for q in self.programs:
            why = q.graph_why() if hasattr(q, "graph_why") else "not a GPU program"
            if why:
                return why
        return ""

    def capture(self, arrays: list, device, graph, alloc=None) -> list:
        """The forward's and the backward's steps captured into one graph
        (mode="reduce-overhead": a training step is one replay), the saved
        values in buffers of the graph's own. Returns every slot's buffer in
        one numbering: the inputs, the forward's slots, then the backward's
        own; `outputs` then gives each result's slot. `alloc` as
        `GpuProgram.capture`'s."""
        from runtime.gpu import layout_class_of

        n, nf = len(arrays), len(self.partition.fwd_results)
        fvals, fwork = self.forward.capture_work(arrays, device, alloc)
        fout = self.forward.outputs
        saved = [fvals[s] for s in fout[nf:]]
        bwd = self.backward_for_layouts(tuple(layout_class_of(x) for x in saved))
        bvals, bwork = bwd.capture_work(list(arrays) + saved, device, alloc)
        graph.capture(fwork + bwork)
        m, f = len(saved), len(fvals)

        def slot(t: int) -> int:  # a backward slot in the one numbering
            return t if t < n else fout[nf + t - n] if t < n + m else f + t - (n + m)
        results = [0] * self.n_results
        for i, s in zip(self.partition.fwd_results, fout[:nf]):
            results[i] = s
        for i, s in zip(self.partition.bwd_results, bwd.outputs):
            results[i] = slot(s)
        self.outputs = tuple(results)
        return list(fvals) + list(bvals[n + m:])
