"""`lowering.explain(fn)(*args)`: what capture did with one call."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from passes.lower_to_loop import source_locations

from . import pytree
from .api import CompiledFunction, compile
from .device_call import device_of, on_host_copies
from .device_graph import explain_line


@dataclass
class ExplainOutput:
    graph_count: int
    graph_break_count: int
    breaks: list
    guards: list[str]
    ops_per_graph: list[dict[str, int]]
    graphs: list[str] = field(repr=False, default_factory=list)
    # per graph: (kernel name, tensor ops fused into it); externs included
    kernels: list[list[tuple[str, list[str]]]] = field(default_factory=list)
    fusion_refused: list[list[str]] = field(default_factory=list)
    # differentiated functions: what the forward saves for the backward
    partitions: list = field(default_factory=list)  # passes.remat.Partition per graph
    # distinct kernel bodies those kernels run (iterations of an unrolled loop
    # that differ only in constants share one)
    kernel_bodies: int = 0
    # with size symbols: "" where the entry serves every size its relations
    # admit, else why it keeps the traced sizes; None where none were tried
    sizes: str | None = None
    # per graph, the kernel level of a program for many sizes (as compiled:
    # its kernel parameters and dynamic extents), or ""
    kernel_levels: list[str] = field(repr=False, default_factory=list)
    # per graph, the cost model's choice for each op it decided (path and why)
    paths: list[list[str]] = field(default_factory=list)
    # per graph of a backend="gpu" function, what each step does on the device
    # (and, with mode="reduce-overhead", whether device-array calls replay a
    # graph of its steps, or why not)
    device: list[list[str]] = field(default_factory=list)

    @property
    def saved_bytes(self) -> int:
        """Bytes the chosen partition saves between forward and backward."""
        return sum(p.saved_bytes for p in self.partitions)

    @property
    def saved_bytes_save_all(self) -> int:
        """Bytes save-everything would save."""
        return sum(p.saved_bytes_save_all for p in self.partitions)

    @property
    def recomputed(self) -> list[str]:
        """Forward ops the backward runs again instead of reading them saved."""
        return [r for p in self.partitions for r in p.recomputed]

    @property
    def kernel_count(self) -> int:
        """Kernels (and externs) one call launches."""
        from .backends.cpu_backend import ONCE

        return sum(1 for ks in self.kernels for name, _ in ks if not name.endswith(ONCE))

    def __str__(self) -> str:
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}"]
        if self.breaks:
            lines.append("Break reasons:")
            for i, b in enumerate(self.breaks, 1):
                lines.append(f"  {i}. {b.reason}")
                lines.append(f"     at {b.filename}:{b.lineno}")
        for i, ops in enumerate(self.ops_per_graph):
            if not ops:  # nothing to compute: the values it returns were made earlier
                lines.append(f"Graph {i}: no ops (returns values made before it)")
                continue
            lines.append(f"Graph {i}: {sum(ops.values())} ops: " +
                         ", ".join(f"{k} x{v}" for k, v in sorted(ops.items())))
        if self.kernels:
            lines.append(f"Kernels per call: {self.kernel_count} "
                         f"({self.kernel_bodies} distinct kernel bodies)")
            for i, (ks, refused) in enumerate(zip(self.kernels, self.fusion_refused)):
                for name, ops in ks:
                    lines.append(f"  graph {i} {name}: " + ", ".join(ops))
                for r in refused:
                    lines.append(f"  graph {i} fusion refused: {r}")
            for i, ps in enumerate(self.paths):
                for p in ps:
                    lines.append(f"  graph {i} path: {p}")
            for i, ds in enumerate(self.device):
                for d in ds:
                    lines.append(f"  graph {i} device: {d}")
        for p in self.partitions:
            lines.append(p.describe())
        if self.sizes == "":
            lines.append("Sizes: symbolic (one program for every size the guards admit)")
        elif self.sizes is not None:
            lines.append(f"Sizes: as traced (not for other sizes: {self.sizes})")
        lines.append("Guards:")
        lines.extend(f"  {g}" for g in self.guards)
        return "\n".join(lines)


def explain(fn, dynamic=None):
    """Return a callable that traces `fn` on the given arguments and reports
    (`dynamic`: as `compile`'s; a compiled function's own by default)."""
    cf = fn if isinstance(fn, CompiledFunction) else compile(fn, dynamic=dynamic)
    # a bare grad/value_and_grad is explained as its compiled form
    dynamic = dynamic if dynamic is not None else getattr(cf, "dynamic", None)

    def run(*args, **kwargs):
        probe = CompiledFunction(cf.fn, cf.mode, dynamic, False, cf.backend,
                                 cf.partition[1], cf.partition[0])
        leaves, treedef = pytree.flatten((args, kwargs))
        dev, where = device_of(leaves)
        if dev is None:
            probe._compile_and_run(args, kwargs, leaves, treedef)
        else:  # device arrays: traced on host copies, as a device call's first call is
            on_host_copies(cf.__qualname__, dev, leaves, where, treedef,
                           lambda a, k, host: probe._compile_and_run(a, k, host, treedef))
        trace = probe.last_trace
        if trace is None:
            return ExplainOutput(0, 0, [], [], [])
        entry = probe.entries[-1]
        ops = []
        graphs = []
        for seg in trace.segments:
            c = Counter(op.name for op in seg.module.walk() if op.name not in ("builtin.module", "func.func", "func.return"))
            ops.append(dict(c))
            graphs.append(str(seg.module))
        kernels, refused, partitions, paths = [], [], [], []
        progs, sites = [], []
        # (a program is shared by every module of its IR: its report's lines
        # are read at this call's own source locations, its segment's)
        here = [source_locations(seg.module) for seg in trace.segments] \
            if len(probe.programs_run) == len(trace.segments) else [None] * len(probe.programs_run)
        for prog, locs in zip(probe.programs_run, here):
            part = getattr(prog, "partition", None)
            if part is not None:
                partitions.append(part)
                progs.extend(prog.programs)
                sites.extend([locs] * len(prog.programs))
            else:
                progs.append(prog)
                sites.append(locs)
        for prog, locs in zip(progs, sites):
            rep = prog.report
            if rep is not None and locs is not None:
                rep = rep.relocated(locs)
            if rep is not None:
                kernels.append(rep.kernels)
                refused.append(rep.refused)
                tuning = getattr(prog, "tuning", None)  # (CPU max-autotune)
                paths.append(list(rep.paths) + (tuning.lines() if tuning is not None else []))
            else:  # the numpy backend: each op is one numpy call
                kernels.append([(f"numpy {getattr(s[0], 'op_name', 'op')}", []) for s in prog.steps])
                refused.append([])
                paths.append([])
        levels = [str(getattr(p, "kernel_module", "") or "") for p in progs]
        device = [p.describe() if hasattr(p, "run_device") else [] for p in progs]
        if cf.mode == "reduce-overhead" and cf.backend == "gpu":
            device = [d + [explain_line(p, entry)] for d, p in zip(device, progs)]
        return ExplainOutput(len(trace.segments), len(trace.breaks), list(trace.breaks),
                             entry.guards.describe(), ops, graphs, kernels, refused, partitions,
                             sum(p.kernel_bodies for p in progs), probe.last_sizes, levels,
                             paths, device if any(device) else [])

    return run
