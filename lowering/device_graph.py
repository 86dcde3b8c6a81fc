"""`mode="reduce-overhead"` on the GPU: a device entry (lowering/device_call.py)
whose program is captured once into a graph (`runtime.gpu.DeviceGraph`: a
CUDA graph through torch or CuPy; a stand-in that records and replays on
the host under `LOWERING_GPU=interpret`) and replayed on later calls, so
that a call costs one graph launch plus its copies instead of one launch
(and one allocation) per step.

The graph bakes in the address of every buffer it touches, so what a call
hands it must be made to sit at those addresses:

- Inputs. At the first capture each array input is *direct*: the graph
  reads the caller's own buffer, and a later call that passes the very same
  buffer (the same data pointer; the entry's key fixes shape, dtype and
  strides, so the same memory) replays with no copy. A call that passes
  another buffer makes that input *copied*, once: the graph is captured
  again, reading a buffer of its own in the caller's layout, into which
  every later call copies the caller's array (device to device) before the
  replay. The caller's buffer of the first capture is never written by
  anything but the program itself. Python scalar arguments (their value is
  in the entry's key) are 0-d arrays made once.
- Writes into arguments reach the caller: a copied input the program writes
  in place is copied back after the replay, and the functionalized writes
  are written back from the graph's outputs as without a graph.
- Results. The graph writes buffers of its own; each call hands out clones
  of them, so a result of an earlier call is never overwritten by a later
  replay (a result that is an argument written in place is the caller's
  array itself).
- Intermediates: buffers allocated once, at the capture, owned by the
  graph's entry and freed with it.

A call on another stream than the capture's, an entry whose program cannot
be captured (`GpuProgram.graph_why`: a numpy routine on host copies) or
whose capture failed, runs step by step as in the default mode, correct;
`explain` and the `perf` log say why. Calls are serialized per entry: its
buffers are shared by every call."""

from __future__ import annotations

import threading

import numpy as np

from runtime import gpu

from .capture.tracer import apply_plan
from .config import logger
from .fastpath import MISS


class GraphedEntry:
    """One device entry of a reduce-overhead function: its graph, the
    buffers the graph reads and writes, and which inputs are copied."""

    def __init__(self, dev: gpu.Device, entry, plain, qualname: str = "function"):
        self.dev = dev
        self.prog, self.bindings, self.out_plan, convert, self.owners = entry.device
        self.state = [c for c in entry.guards.checks if c.where == "G"]
        self.gvals = entry.gvals
        self.scalars = [(i, c) for i, c in enumerate(convert) if c is not None]
        self.plain = plain  # (leaves, tree) -> results: the steps one by one
        self.name = qualname
        self.why = _why_not(dev, self.prog)  # "" while graphs are used
        if self.why:
            logger("perf").info("%s: no graph (%s)", qualname, self.why)
        self.graph: gpu.DeviceGraph | None = None
        self.vals: list = []  # every slot's buffer of the graph, inputs first
        self.made: dict[int, object] = {}  # program input -> its 0-d array (a scalar argument)
        self.copied: set[int] = set()  # program inputs read from a buffer of the graph's own
        self.own: dict[int, object] = {}  # those buffers (kept across captures)
        self.ptrs: list = []  # per program input: the address the graph reads (direct ones)
        self.stream = None
        self.captures = 0
        self.replays = 0
        self.lock = threading.Lock()
        self.written = self.prog.inputs_written
        # results that reach the caller as they are (not only written back
        # into an argument): cloned on every call
        back = {idx for _, idx in self.out_plan.writebacks}
        self.cloned = {leaf[1] for leaf in self.out_plan.leaves if leaf[0] == "out"} - back

    def __call__(self, leaves, tree):
        if self.state:
            g = self.gvals(leaves, tree)
            if g is None or any(c.failure(leaves, g) for c in self.state):
                return MISS
        with self.lock:
            if self.why:
                return self.plain(leaves, tree)
            inputs = [leaves[b] for b in self.bindings]
            for i, c in self.scalars:
                inputs[i] = self._scalar(i, c, inputs[i])
            if not self._ready(inputs):
                return self.plain(leaves, tree)
            results = self._replay(inputs)
            return apply_plan(self.out_plan, results, leaves)

    def _scalar(self, i: int, convert, value):
        """A Python scalar argument as the program's 0-d input: made once
        (its value is part of the entry's key), so its address is fixed."""
        x = self.made.get(i)
        if x is None:
            x = self.made[i] = self.dev.from_host(np.asarray(convert(value)))
        return x

    def _ready(self, inputs) -> bool:
        """Whether a replay serves these inputs, capturing again first where
        a direct input moved (it becomes copied); False: run step by step."""
        dev = self.dev
        if self.graph is not None:
            if dev.current_stream() != self.stream:
                return False
            moved = {i for i, p in enumerate(self.ptrs)
                     if p is not None and dev.data_ptr(inputs[i]) != p}
            if not moved:
                return True
            self.copied |= moved
        return self._capture(inputs)

    def _capture(self, inputs) -> bool:
        """Capture the program reading the direct inputs where the caller's
        arrays are and the copied ones from the graph's own buffers; False
        (for good: `why` says why) where the capture fails."""
        dev = self.dev
        for i in self.copied:
            if i not in self.own:
                self.own[i] = dev.empty_like(inputs[i])
        static = [self.own[i] if i in self.copied else x for i, x in enumerate(inputs)]
        graph = dev.graph()
        try:
            vals = self.prog.capture(static, dev, graph)
        except Exception as e:  # (nothing ran: the call runs step by step)
            self.why = f"its capture failed ({type(e).__name__}: {e})"
            self.graph, self.vals = None, []
            logger("perf").info("%s: no graph (%s)", self.name, self.why)
            return False
        self.graph, self.vals, self.stream = graph, vals, dev.current_stream()
        self.ptrs = [None if i in self.copied else dev.data_ptr(x) for i, x in enumerate(static)]
        self.captures += 1
        logger("perf").info("%s: graph captured (%d of %d inputs copied in)", self.name,
                            len(self.copied), len(static))
        return True

    def _replay(self, inputs) -> list:
        """Copy in, replay, copy back; the results as `apply_plan` takes
        them (all on the current stream, in this order: a later call's
        copies and replay come after this call's clones)."""
        graph, vals = self.graph, self.vals
        for i in self.copied:
            graph.copy(vals[i], inputs[i])
        graph.replay()
        self.replays += 1
        for s in self.written:
            if s in self.copied:
                graph.copy(inputs[s], vals[s])
        n = len(inputs)
        out = []
        taken: set[int] = set()
        for k, s in enumerate(self.prog.outputs):
            owner = self.owners[k] if k < len(self.owners) else None
            if s < n and s not in self.made and owner == s and s not in taken:
                # the argument itself (`x += 1; return x`): the caller's array,
                # written back above
                out.append(inputs[s])
                taken.add(s)
            elif s < n and s not in self.made:  # a copy of an argument (`x.copy()`)
                out.append(graph.clone(inputs[s]))
            elif k in self.cloned:
                out.append(graph.clone(vals[s]))
            else:
                out.append(vals[s])  # only written back into an argument (apply_plan)
        return out


def _why_not(dev: gpu.Device, prog) -> str:
    """Why an entry's program is not graphed ("" where it is)."""
    why = prog.graph_why()
    if why:
        return why
    try:
        dev.graph()
    except gpu.NotCapturable as e:
        return str(e)
    return ""


def explain_line(prog, entry) -> str:
    """What mode="reduce-overhead" does with one program of an entry, for
    `explain`."""
    if entry.device_why:
        return ("reduce-overhead: no graph: calls on device arrays run on host copies "
                f"({entry.device_why})")
    why = prog.graph_why() if hasattr(prog, "graph_why") else "its program is not a GPU program"
    if why:
        return f"reduce-overhead: no graph: {why}; device-array calls run its steps one by one"
    return ("reduce-overhead: calls on device arrays replay one graph of its steps "
            "(captured at the first call of each device entry; arguments copied into its "
            "own buffers unless passed at the addresses it was captured with; results "
            "cloned)")
