"""Partition a joint forward+backward function (ops of the backward carry the
`bwd` attribute, see `passes/autograd.py`) into a forward function — the
outputs plus the values saved for the backward — and a backward function —
saved values and the inputs to the remaining results.

Strategies:
- "save_all": every forward value the backward reads is saved.
- "min_cut": functorch's min-cut rematerialization. A flow graph has one edge
  per forward value, of capacity its bytes, from its "in" to its "out" node;
  uses are infinite edges; every forward value the backward reads has an
  infinite edge to the sink. The graph's inputs cost nothing to keep (the
  caller holds them), so the source reaches them for free. Values the forward
  outputs need and that must not be recomputed (matmuls, scans, reductions
  whose input is more than 4x their output, numpy routines: sorts, LAPACK)
  hang from the source too. The minimum cut is the set of values to save;
  every forward op on the sink side that the backward needs is recomputed
  there, where it fuses with the backward's own kernels. Ops inside
  `lowering.checkpoint` regions (`remat` attribute) are never saved (infinite
  capacity) nor banned.
- `memory_budget` (a fraction of save_all's bytes): the least recomputation
  that fits — save_all, then min_cut, then min_cut with the bans lifted
  (matmuls and reductions recomputed too); if none fits, the smallest, and the
  report says why.

The max-flow/min-cut is networkx's (`minimum_cut`), not our own.

The `remat` pass is the pipeline's stage: it replaces @f by @f_forward and
@f_backward and leaves on them what a program built from its output needs
(`record_cut`): on each half `remat.results`, the positions of @f's results it
computes (the forward's further results are the saved values, which the
backward takes after @f's arguments), and on the forward `remat.report`, the
partition's figures that `lowering.explain` shows. `read_cut` reads them back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr, DenseArrayBase, DictionaryAttr, FloatAttr, IntegerAttr, ModuleOp, StringAttr, f64,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.transforms.dead_code_elimination import would_be_trivially_dead

from dialects import array as A
from dialects.dtypes import from_ir

from .autograd import BWD, REMAT

STRATEGIES = ("save_all", "min_cut")
RESULTS = "remat.results"  # on each half: the joint function's results it computes
REPORT = "remat.report"  # on the forward: the partition's figures


def nbytes(v: SSAValue) -> int:
    return _type_bytes(v.type)


def _type_bytes(t: Attribute) -> int:
    n = int(np.prod(t.get_shape(), dtype=np.int64))  # type: ignore[attr-defined]
    return n * from_ir(t.element_type).itemsize  # type: ignore[attr-defined]


def _banned(op: Operation) -> bool:
    """Too expensive to recompute: matmuls, scans, big reductions, numpy
    routines (sorts, LAPACK)."""
    if isinstance(op, (A.DotOp, A.ScanOp, A.ArgReduceOp, A.RoutineOp)):
        return True
    if isinstance(op, A.ReduceOp):
        return nbytes(op.input) > 4 * nbytes(op.result)
    return False


@dataclass
class Partition:
    forward: ModuleOp
    backward: ModuleOp
    fwd_results: list[int]  # result positions the forward computes
    bwd_results: list[int]  # result positions the backward computes
    saved: list[tuple[str, tuple[int, ...], str, int]]  # (op, shape, dtype, bytes)
    strategy: str
    saved_bytes: int
    saved_bytes_save_all: int
    saved_bytes_min_cut: int
    recomputed: list[str] = field(default_factory=list)  # forward ops run again in the backward
    budget: float | None = None
    note: str = ""

    def describe(self) -> str:
        lines = [f"partition: {self.strategy}, saved {self.saved_bytes} bytes "
                 f"(save_all {self.saved_bytes_save_all}, min_cut {self.saved_bytes_min_cut})"]
        for name, shape, dt, b in self.saved:
            lines.append(f"  saved {name} {dt}{list(shape)}: {b} bytes")
        if self.recomputed:
            lines.append("  recomputed in the backward: " + ", ".join(self.recomputed))
        if self.note:
            lines.append("  " + self.note)
        return "\n".join(lines)


def _split(block: Block) -> tuple[list[Operation], list[Operation], func.ReturnOp]:
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    fwd, bwd = [], []
    bwd_vals: set[SSAValue] = set()
    for op in block.ops:
        if op is ret:
            continue
        if op.attributes.get(BWD) is not None or any(o in bwd_vals for o in op.operands):
            bwd.append(op)
            bwd_vals.update(op.results)
        else:
            fwd.append(op)
    return fwd, bwd, ret


def has_backward(op: Operation) -> bool:
    """Whether `op` (a module, a function) holds ops of a backward computation."""
    return any(o.attributes.get(BWD) is not None for o in op.walk())


def _needed_by(values, stop: set[SSAValue]) -> list[Operation]:
    """Forward ops that compute `values` from `stop` and the arguments, in
    program order."""
    seen: set[Operation] = set()
    order: list[Operation] = []
    stack = [v for v in values if v not in stop]
    while stack:
        v = stack.pop()
        op = v.owner
        if not isinstance(op, Operation) or op in seen:
            continue
        seen.add(op)
        order.append(op)
        stack.extend(o for o in op.operands if o not in stop)
    return order


_VIEWS = (A.BroadcastOp, A.ReshapeOp, A.TransposeOp, A.SliceOp)


def _materialized(values: list[SSAValue], args: set[SSAValue]) -> list[SSAValue]:
    """What saving `values` stores: views (broadcast, reshape, transpose,
    slice — index maps, never copies) save their source instead; inputs and
    values computed from constants alone cost nothing."""
    out: list[SSAValue] = []
    seen: set[SSAValue] = set()
    # depth-first, operands in order, on an explicit stack (a checkpointed
    # chain of thousands of ops nests no calls); a value is visited once
    stack = list(reversed(values))
    while stack:
        v = stack.pop()
        while isinstance(v.owner, _VIEWS):
            v = v.owner.operands[0]
        if v in seen:
            continue
        seen.add(v)
        op = v.owner
        if isinstance(op, Operation) and op.attributes.get(REMAT) is not None:
            # checkpointed: saved as what it is computed from
            stack.extend(reversed(op.operands))
        elif not (v in args if not isinstance(op, Operation)
                  else isinstance(op, (A.ConstantOp, A.IotaOp))):
            out.append(v)
    return out


def _min_cut(fwd: list[Operation], crossing: list[SSAValue], fwd_outs: set[SSAValue],
             args, bans: bool) -> list[SSAValue]:
    import networkx as nx

    g = nx.DiGraph()
    g.add_node("source")
    g.add_node("sink")
    required_fw = {op for op in _needed_by(list(fwd_outs), set())}
    for a in args:
        g.add_edge("source", ("in", a))
        g.add_edge(("in", a), ("out", a), capacity=0)
    for op in fwd:
        for r in op.results:
            remat = op.attributes.get(REMAT) is not None
            if bans and op in required_fw and _banned(op) and not remat:
                g.add_edge("source", ("in", r))
            if remat:
                g.add_edge(("in", r), ("out", r))  # infinite: never saved
            else:
                g.add_edge(("in", r), ("out", r), capacity=nbytes(r))
            for o in op.operands:
                g.add_edge(("out", o), ("in", r))
    for v in crossing:
        g.add_edge(("out", v), "sink")
    _, (reach, _) = nx.minimum_cut(g, "source", "sink")
    saved = []
    for op in fwd:
        for r in op.results:
            if ("in", r) in reach and ("out", r) not in reach:
                saved.append(r)
    return saved


def partition(module: ModuleOp, strategy: str = "min_cut",
              memory_budget: float | None = None) -> Partition | None:
    """Cut the joint function of `module` (one func) in two; None when it has
    no backward ops."""
    if strategy not in STRATEGIES:
        raise ValueError(f"partition strategy must be one of {STRATEGIES}, got {strategy!r}")
    f = next(op for op in module.ops if isinstance(op, func.FuncOp))
    block = f.body.blocks[0]
    fwd, bwd, ret = _split(block)
    if not bwd:
        return None
    fwd_set = set(fwd)
    bwd_set = set(bwd)
    args = list(block.args)
    crossing: list[SSAValue] = []
    for op in bwd:
        for o in op.operands:
            if isinstance(o.owner, Operation) and o.owner in fwd_set and o not in crossing:
                crossing.append(o)
    fwd_results = [i for i, v in enumerate(ret.arguments)
                   if not (isinstance(v.owner, Operation) and v.owner in bwd_set)]
    bwd_results = [i for i in range(len(ret.arguments)) if i not in fwd_results]
    fwd_outs = {ret.arguments[i] for i in fwd_results}

    def cost(saved):
        return sum(nbytes(v) for v in saved)

    save_all = _materialized(crossing, set(args))
    cut = _min_cut(fwd, crossing, fwd_outs, args, bans=True)
    note = ""
    if memory_budget is None:
        chosen, saved, name = "min_cut", cut, "min_cut"
    else:
        limit = memory_budget * cost(save_all)
        cands = [("save_all", save_all), ("min_cut", cut)]
        if cost(cut) > limit:
            cands.append(("min_cut_recompute_all", _min_cut(fwd, crossing, fwd_outs, args, bans=False)))
        fits = [(n, s) for n, s in cands if cost(s) <= limit]
        if fits:
            name, saved = fits[0]
        else:
            name, saved = min(cands, key=lambda c: cost(c[1]))
            note = (f"memory_budget {memory_budget} ({int(limit)} bytes) not met: the least "
                    f"any partition saves is {cost(saved)} bytes (values the backward needs "
                    "that cannot be recomputed from the inputs)")
        chosen = name
    if strategy == "save_all":
        chosen, saved = "save_all", save_all
    saved_set = set(saved)

    # the forward: what the outputs and the saved values need, and what DCE
    # keeps though nothing uses it (an index check: numpy raises there; an
    # op of no results, `array.flags`: the unused values it computes for
    # their floating-point flags)
    effects = [op for op in fwd if not any(x.uses for x in op.results)
               and not would_be_trivially_dead(op)]
    kept = [v for op in effects for v in (op.results or op.operands)]
    fwd_needed = set(_needed_by([ret.arguments[i] for i in fwd_results] + saved + kept,
                                set(args))) | {op for op in effects if not op.results}
    f_ops = [op for op in fwd if op in fwd_needed]
    fmod = _build(args, f_ops, [ret.arguments[i] for i in fwd_results] + saved)
    # the backward: recompute what it reads and was not saved, then its ops
    re_ops = set(_needed_by(crossing, saved_set | set(args)))
    recompute = [op for op in fwd if op in re_ops]
    bargs = args + saved
    bmod = _build(bargs, recompute + bwd, [ret.arguments[i] for i in bwd_results])
    return Partition(
        fmod, bmod, fwd_results, bwd_results,
        [(v.owner.name if isinstance(v.owner, Operation) else "arg", tuple(v.type.get_shape()),
          str(v.type.element_type), nbytes(v)) for v in saved],
        chosen, cost(saved), cost(save_all), cost(cut),
        [op.name if not isinstance(op, A.UfuncOp) else f"array.ufunc {op.fn.data}"
         for op in recompute if not isinstance(op, (A.ConstantOp, A.BroadcastOp))],
        memory_budget, note)


def _build(args: list[SSAValue], ops: list[Operation], results: list[SSAValue]) -> ModuleOp:
    block = Block(arg_types=[a.type for a in args])
    vmap: dict[SSAValue, SSAValue] = dict(zip(args, block.args))
    for op in ops:
        c = op.clone(value_mapper=vmap)
        for name in (BWD, REMAT):
            c.attributes.pop(name, None)
        block.add_op(c)
    block.add_op(func.ReturnOp(*[vmap[v] for v in results]))
    fn = func.FuncOp("main", ([a.type for a in args], [v.type for v in results]), Region(block))
    return ModuleOp([fn])


def record_cut(p: Partition, forward: func.FuncOp, backward: func.FuncOp) -> None:
    """Leave on the two halves what a program built from them needs: the
    joint function's result positions of each, and the partition's report
    (strategy, bytes, what is saved and recomputed, the budget's note)."""
    forward.attributes[RESULTS] = DenseArrayBase.from_list(i64, p.fwd_results)
    backward.attributes[RESULTS] = DenseArrayBase.from_list(i64, p.bwd_results)
    report: dict[str, Attribute] = {
        "strategy": StringAttr(p.strategy),
        "saved_bytes": IntegerAttr(p.saved_bytes, i64),
        "save_all_bytes": IntegerAttr(p.saved_bytes_save_all, i64),
        "min_cut_bytes": IntegerAttr(p.saved_bytes_min_cut, i64),
        # what computes each saved value (its type is the forward's result type)
        "saved": ArrayAttr([StringAttr(name) for name, *_ in p.saved]),
        "recomputed": ArrayAttr([StringAttr(r) for r in p.recomputed]),
    }
    if p.budget is not None:
        report["memory_budget"] = FloatAttr(p.budget, f64)
    if p.note:
        report["note"] = StringAttr(p.note)
    forward.attributes[REPORT] = DictionaryAttr(report)


def read_cut(module: ModuleOp) -> Partition | None:
    """The partition the `remat` pass left in `module` (None where it cut
    nothing): each half as a module of its own, its function named @main as
    every segment's is, and the report `record_cut` recorded."""
    funcs = {f.sym_name.data: f for f in module.ops if isinstance(f, func.FuncOp)}
    fwd = next((f for f in funcs.values() if REPORT in f.attributes), None)
    if fwd is None:
        return None
    base = fwd.sym_name.data.removesuffix("_forward")
    bwd = funcs[f"{base}_backward"]
    rep = fwd.attributes[REPORT]
    assert isinstance(rep, DictionaryAttr)
    d = rep.data
    n_fwd = len(_positions(fwd))
    saved_types: list = list(fwd.function_type.outputs.data[n_fwd:])
    saved = [(name.data, tuple(t.get_shape()), str(t.element_type), _type_bytes(t))
             for name, t in zip(d["saved"].data, saved_types)]  # type: ignore[attr-defined]
    budget = d.get("memory_budget")
    note = d.get("note")
    return Partition(
        _alone(fwd), _alone(bwd), _positions(fwd), _positions(bwd), saved,
        d["strategy"].data, d["saved_bytes"].value.data,  # type: ignore[attr-defined]
        d["save_all_bytes"].value.data, d["min_cut_bytes"].value.data,  # type: ignore[attr-defined]
        [r.data for r in d["recomputed"].data],  # type: ignore[attr-defined]
        None if budget is None else budget.value.data,  # type: ignore[attr-defined]
        "" if note is None else note.data)  # type: ignore[attr-defined]


def _positions(f: func.FuncOp) -> list[int]:
    a = f.attributes[RESULTS]
    assert isinstance(a, DenseArrayBase)
    return [int(v) for v in a.get_values()]


def _alone(f: func.FuncOp) -> ModuleOp:
    g = f.clone()
    for name in (RESULTS, REPORT):
        g.attributes.pop(name, None)
    g.sym_name = StringAttr("main")
    return ModuleOp([g])


@dataclass(frozen=True)
class Remat(ModulePass):
    """The pipeline's forward/backward cut (`xdsl-opt -p
    'remat{strategy=min_cut memory_budget=0.5}'`): replace each joint
    function @f by @f_forward (its forward results, then the saved values)
    and @f_backward (its arguments and the saved values -> the backward
    results), with the cut recorded on them (`record_cut`). A function
    without backward ops is left as it is."""

    name = "remat"
    strategy: str = "min_cut"
    memory_budget: float | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in [o for o in op.ops if isinstance(o, func.FuncOp)]:
            if not has_backward(f):  # (most segments: no copy made)
                continue
            p = partition(ModuleOp([f.clone()]), self.strategy, self.memory_budget)
            if p is None:
                continue
            halves = []
            for part, suffix in ((p.forward, "forward"), (p.backward, "backward")):
                g = next(o for o in part.ops if isinstance(o, func.FuncOp))
                g.detach()
                g.sym_name = StringAttr(f"{f.sym_name.data}_{suffix}")
                op.body.block.insert_op_before(g, f)
                halves.append(g)
            record_cut(p, *halves)
            f.detach()
            f.erase()
