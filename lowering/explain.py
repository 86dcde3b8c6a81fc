"""`lowering.explain(fn)(*args)`: what capture did with one call."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from . import pytree
from .api import CompiledFunction, compile


@dataclass
class ExplainOutput:
    graph_count: int
    graph_break_count: int
    breaks: list
    guards: list[str]
    ops_per_graph: list[dict[str, int]]
    graphs: list[str] = field(repr=False, default_factory=list)

    def __str__(self) -> str:
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}"]
        if self.breaks:
            lines.append("Break reasons:")
            for i, b in enumerate(self.breaks, 1):
                lines.append(f"  {i}. {b.reason}")
                lines.append(f"     at {b.filename}:{b.lineno}")
        for i, ops in enumerate(self.ops_per_graph):
            lines.append(f"Graph {i}: {sum(ops.values())} ops: " +
                         ", ".join(f"{k} x{v}" for k, v in sorted(ops.items())))
        lines.append("Guards:")
        lines.extend(f"  {g}" for g in self.guards)
        return "\n".join(lines)


def explain(fn):
    """Return a callable that traces `fn` on the given arguments and reports."""
    cf = fn if isinstance(fn, CompiledFunction) else compile(fn)

    def run(*args, **kwargs):
        probe = CompiledFunction(cf.fn, cf.mode, None, False, cf.backend)
        leaves, treedef = pytree.flatten((args, kwargs))
        gvals = [g.get() for g in probe._arrays] + [g.get() for g in probe._scalars]
        probe._compile_and_run(args, kwargs, leaves, treedef, gvals)
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
        return ExplainOutput(len(trace.segments), len(trace.breaks), list(trace.breaks),
                             entry.guards.describe(), ops, graphs)

    return run
