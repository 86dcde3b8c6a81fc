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
- Results. The graph writes buffers of its own, which are handed to the
  caller as they are (a new array object on the buffer, `Device.share`):
  no copy. A later call replays that graph only when nothing refers to
  those buffers any more (`Device.probe`: the caller dropped the results
  and every view of them); otherwise it replays another capture of the
  program with output buffers of its own (up to `RING` such captures, all
  sharing the intermediates and the copied inputs' buffers), and when all
  of them are held, a last capture whose results are cloned for the caller
  (the only copy left: a caller keeping every result, `losses.append(f(x))`).
  So an earlier result is never overwritten by a later replay. Where the
  device cannot count what refers to a buffer, results are cloned. A
  result that is an argument written in place is the caller's array
  itself.
- Intermediates: buffers allocated once, at the first capture, owned by
  the graph's entry and freed with it.

A call on another stream than the capture's, an entry whose program cannot
be captured (`GpuProgram.graph_why`: a numpy routine on host copies) or
whose capture failed, runs step by step as in the default mode, correct;
`explain` and the `perf` log say why. Calls are serialized per entry: its
buffers are shared by every call."""

from __future__ import annotations

import threading

import numpy as np

from runtime import gpu

from . import device_random, pytree
from .capture.tracer import apply_plan
from .config import logger
from .fastpath import MISS


RING = 2  # captures whose results are handed out (a third one's are cloned)


class _Capture:
    """One capture of an entry's program: its graph, every slot's buffer,
    and per buffer it hands out a probe and the probe's count while no
    caller holds the buffer (`free`). `cloned`: its results are cloned."""

    __slots__ = ("graph", "vals", "probes", "cloned")

    def __init__(self, graph, vals, probes, cloned: bool):
        self.graph, self.vals, self.probes, self.cloned = graph, vals, probes, cloned

    def free(self) -> bool:
        for probe, idle in self.probes:
            if probe() != idle:
                return False
        return True


def _hot_source_call(entry: "GraphedEntry", actions: list, pick: tuple, treedef):
    """`GraphedEntry.hot` as one generated function, straight-line for this
    entry's graphs as they are: the stream and each direct input's address
    checked, then, under the lock, the first capture nobody holds results of
    replayed and its results handed out (each shared slot once), or MISS.
    (A loop over captures, probes and actions cost about a microsecond of
    W6's call.)"""
    bindings, dev = entry.bindings, entry.dev
    # (the device's methods looked up at each call, as a device object may change them)
    ns: dict = {"MISS": MISS, "entry": entry, "lock": entry.lock, "s0": entry.stream,
                "dev": dev, "unflatten": pytree.unflatten, "treedef": treedef}
    lines = ["def hot(args):", "    if dev.current_stream() != s0:", "        return MISS"]
    for k, (i, p) in enumerate(entry.direct):
        ns[f"p{k}"] = p
        lines += [f"    if dev.data_ptr(args[{bindings[i]}]) != p{k}:", "        return MISS"]
    shared = sorted({s for sh, s in actions if sh})
    lines += ["    with lock:", "        share = dev.share"]
    for g, cap in enumerate(entry.graphs):
        free = []
        for j, (probe, idle) in enumerate(cap.probes):
            ns[f"g{g}_probe{j}"], ns[f"g{g}_idle{j}"] = probe, idle
            free.append(f"g{g}_probe{j}() == g{g}_idle{j}")
        lines.append(f"        {'if' if g == 0 else 'elif'} {' and '.join(free) or 'True'}:")
        ns[f"g{g}_replay"] = cap.graph.replay
        lines.append(f"            g{g}_replay()")
        for s in shared:
            ns[f"g{g}_v{s}"] = cap.vals[s]
            lines.append(f"            y{s} = share(g{g}_v{s})")
    lines += ["        else:", "            return MISS",
              f"        entry.shares += {len(shared)}", "        entry.replays += 1"]
    outs = [f"y{s}" if sh else f"args[{bindings[s]}]" for sh, s in actions]
    picked = [outs[k] for k in pick]
    if treedef is None:
        lines.append(f"    return {picked[0]}")
    elif (type(treedef) is tuple and treedef[0] is tuple
          and all(d is None for d in treedef[1])):
        lines.append(f"    return ({', '.join(picked)}{',' if len(picked) == 1 else ''})")
    else:
        lines.append(f"    return unflatten(treedef, [{', '.join(picked)}])")
    exec("\n".join(lines), ns)  # noqa: S102 (our own text, from the entry's plan)
    return ns["hot"]


class GraphedEntry:
    """One device entry of a reduce-overhead function: its graphs, the
    buffers they read and write, and which inputs are copied."""

    def __init__(self, dev: gpu.Device, entry, plain, qualname: str = "function"):
        self.dev = dev
        self.prog, self.bindings, self.out_plan, convert, self.owners = entry.device
        self.state = [c for c in entry.guards.checks if c.where == "G"]
        self.gvals = entry.gvals
        self.scalars = [(i, c) for i, c in enumerate(convert)
                        if c is not None and type(self.bindings[i]) is int]
        self.draws = device_random.draws_of(self.prog, self.bindings)
        self.plain = plain  # (leaves, tree) -> results: the steps one by one
        self.name = qualname
        self.why = _why_not(dev, self.prog)  # "" while graphs are used
        if self.why:
            logger("perf").info("%s: no graph (%s)", qualname, self.why)
        self.graphs: list[_Capture] = []  # the captures handing their results out
        self.last: _Capture | None = None  # the capture whose results are cloned
        # program input -> its buffer made once: a scalar argument's 0-d
        # array, a random draw's values (made on the device every call)
        self.made: dict[int, object] = {}
        self.copied: set[int] = set()  # program inputs read from a buffer of the graph's own
        self.own: dict[int, object] = {}  # those buffers (kept across captures)
        self.direct: list = []  # (program input, the address the graphs read) of direct ones
        self.allocs: list | None = None  # the intermediates of the first capture, in order
        self.fresh: set[int] = set()  # which of them each capture makes anew (its results)
        self.handed: tuple[int, ...] | None = None  # output slots handed out (not cloned)
        self.actions: dict[bool, list] = {}  # `_plan_results`
        self.stream = None
        self.hot = None  # `_arm`: the replay of a call that needs nothing else
        self.captures = 0
        self.replays = 0
        self.copies = 0  # copies into copied inputs and back out of them
        self.clones = 0  # results cloned for the caller
        self.shares = 0  # results handed out as they are
        self.lock = threading.Lock()
        self.written = self.prog.inputs_written
        # results that reach the caller as they are (not only written back
        # into an argument): handed out or cloned on every call
        back = {idx for _, idx in self.out_plan.writebacks}
        self.cloned = {leaf[1] for leaf in self.out_plan.leaves if leaf[0] == "out"} - back

    @property
    def graph(self):
        """The first capture's graph (None before it, or without graphs)."""
        first = self.graphs[0] if self.graphs else self.last
        return first.graph if first is not None else None

    def __call__(self, leaves, tree):
        if self.state:
            g = self.gvals(leaves, tree)
            if g is None or any(c.failure(leaves, g) for c in self.state):
                return MISS
        with self.lock:
            if self.why:
                return self.plain(leaves, tree)
            inputs = [leaves[b] if type(b) is int else None for b in self.bindings]
            for i, c in self.scalars:
                inputs[i] = self._scalar(i, c, inputs[i])
            if not self.draws:
                cap = self._ready(inputs)
                if cap is None:
                    return self.plain(leaves, tree)
                results = self._replay(cap, inputs)
                return apply_plan(self.out_plan, results, leaves)
            states = device_random.generator_states([d for _, d in self.draws], leaves)
            try:  # each draw made into a buffer of the entry's own, read in place
                for i, d in self.draws:
                    inputs[i] = self._drawn(i, d, leaves)
                cap = self._ready(inputs)
                if cap is None:
                    device_random.restore(states)
                    return self.plain(leaves, tree)
                results = self._replay(cap, inputs)
            except BaseException:
                device_random.restore(states)
                raise
            return apply_plan(self.out_plan, results, leaves)

    def _drawn(self, i: int, d, leaves):
        """Random draw `d` (program input i) made on the device into a
        buffer made once, so its address is fixed."""
        x = self.made.get(i)
        if x is None:
            x = self.made[i] = self.dev.empty(d.shape, d.dtype)
        d.fill(self.dev, x, d.seed(leaves))
        return x

    def _scalar(self, i: int, convert, value):
        """A Python scalar argument as the program's 0-d input: made once
        (its value is part of the entry's key), so its address is fixed."""
        x = self.made.get(i)
        if x is None:
            x = self.made[i] = self.dev.from_host(np.asarray(convert(value)))
        return x

    def _ready(self, inputs) -> _Capture | None:
        """The capture a replay for these inputs runs: one whose handed-out
        results nobody holds, else a new one (up to RING), else the one
        whose results are cloned; captures are made again first where a
        direct input moved (it becomes copied). None: run step by step."""
        dev = self.dev
        if self.stream is not None:
            if dev.current_stream() != self.stream:
                return None
            data_ptr, moved = dev.data_ptr, None
            for i, p in self.direct:
                if data_ptr(inputs[i]) != p:
                    moved = moved or set()
                    moved.add(i)
            if moved:
                self.copied |= moved
                self.graphs, self.last = [], None  # (results already handed out stay the caller's)
                self.hot = None
        for cap in self.graphs:
            if cap.free():
                return cap
        if not self.graphs or (len(self.graphs) < RING and self.handed):
            return self._capture(inputs, cloned=False)
        if self.last is None:
            return self._capture(inputs, cloned=True)
        return self.last

    def _capture(self, inputs, cloned: bool) -> _Capture | None:
        """Capture the program reading the direct inputs where the caller's
        arrays are and the copied ones from the graph's own buffers; None
        (for good: `why` says why) where the capture fails."""
        dev = self.dev
        for i in self.copied:
            if i not in self.own:
                self.own[i] = dev.empty_like(inputs[i])
        static = [self.own[i] if i in self.copied else x for i, x in enumerate(inputs)]
        made: list = []

        def alloc(shape, dtype):  # the first capture's intermediates, results anew
            k = len(made)
            reuse = self.allocs is not None and k not in self.fresh and k < len(self.allocs)
            made.append(self.allocs[k] if reuse else dev.empty(shape, dtype))
            return made[-1]

        graph = dev.graph()
        try:
            vals = self.prog.capture(static, dev, graph, alloc)
        except Exception as e:  # (nothing ran: the call runs step by step)
            self.why = f"its capture failed ({type(e).__name__}: {e})"
            self.graphs, self.last = [], None
            logger("perf").info("%s: no graph (%s)", self.name, self.why)
            return None
        if self.allocs is None:
            self._plan_handing(vals, list(made))
        made.clear()  # (a probe's count is taken with only lasting references left)
        probes = []
        if not cloned:
            for s in self.handed:
                probe = dev.probe(vals[s])
                probes.append((probe, probe()))
        cap = _Capture(graph, vals, probes, cloned)
        if cloned:
            self.last = cap
        else:
            self.graphs.append(cap)
        self.stream = dev.current_stream()
        self.direct = [(i, dev.data_ptr(x)) for i, x in enumerate(static) if i not in self.copied]
        self.captures += 1
        logger("perf").info("%s: graph captured (%d of %d inputs copied in; results %s)",
                            self.name, len(self.copied), len(static),
                            "cloned" if cloned or not self.handed else "handed out")
        self._arm()
        return cap

    def _arm(self) -> None:
        """`hot`: a call's whole work where it is only a replay — no guard on
        Python state, no scalar argument or random draw to make, no input
        copied in or written, every result handed out as it is or the
        argument itself — for `device_call.fast` to call with the call's
        positional arguments: the same checks as `_ready` (the stream, the
        direct inputs' addresses, a capture whose results nobody holds), in
        straight-line code; MISS (nothing done) sends the call the general
        way. A third of W6's host time per call."""
        self.hot = None
        plan = self.out_plan
        if (self.why or self.state or self.draws or self.scalars or self.copied or self.written
                or not self.graphs or plan.writebacks
                or any(type(b) is not int for b in self.bindings)):
            return
        if any(act not in (SHARE, ARG) for act, _ in self.actions[False]):
            return
        if any(leaf[0] != "out" or leaf[2] or leaf[3] for leaf in plan.leaves):
            return
        pick = tuple(leaf[1] for leaf in plan.leaves)
        self.hot = _hot_source_call(self, [(act == SHARE, s) for act, s in self.actions[False]],
                                    pick, plan.treedef)

    def _plan_handing(self, vals: list, made: list) -> None:
        """After the first capture: which results are handed out (those in
        buffers the capture allocated, on a device that can tell when
        nobody holds them) and which allocations each capture makes anew."""
        self.allocs = made
        index = {id(b): k for k, b in enumerate(made)}
        handed = []
        for k, s in enumerate(self.prog.outputs):
            if (k in self.cloned and id(vals[s]) in index and s not in handed
                    and self.dev.probe(vals[s]) is not None):
                handed.append(s)
        self.handed = tuple(handed)
        self.fresh = {index[id(vals[s])] for s in handed}
        self._plan_results()

    def _replay(self, cap: _Capture, inputs) -> list:
        """Copy in, replay, copy back; the results as `apply_plan` takes
        them (all on the current stream, in this order: a later call's
        copies and replay come after this call's clones)."""
        graph, vals, dev = cap.graph, cap.vals, self.dev
        for i in self.copied:
            graph.copy(vals[i], inputs[i])
            self.copies += 1
        graph.replay()
        self.replays += 1
        for s in self.written:
            if s in self.copied:
                graph.copy(inputs[s], vals[s])
                self.copies += 1
        out = []
        shared: dict[int, object] = {}
        for act, s in self.actions[cap.cloned]:
            if act == SHARE:  # (one array per slot, as numpy's)
                y = shared.get(s)
                if y is None:
                    y = shared[s] = dev.share(vals[s])
                    self.shares += 1
                out.append(y)
            elif act == ARG:  # the argument itself (`x += 1; return x`), written back above
                out.append(inputs[s])
            elif act == VAL:  # only written back into an argument (apply_plan)
                out.append(vals[s])
            else:  # a clone: of a result, or of an argument (`x.copy()`)
                out.append(graph.clone(inputs[s] if act == ARG_COPY else vals[s]))
                self.clones += 1
        return out

    def _plan_results(self) -> None:
        """What `_replay` does with each result, for a capture handing its
        results out (actions[False]) and for one cloning them (actions[True])."""
        n = len(self.bindings)
        plans: dict[bool, list] = {}
        for cloned in (False, True):
            handed = () if cloned else self.handed
            plan, taken = [], set()
            for k, s in enumerate(self.prog.outputs):
                owner = self.owners[k] if k < len(self.owners) else None
                if s < n and s not in self.made and owner == s and s not in taken:
                    plan.append((ARG, s))
                    taken.add(s)
                elif s < n and s not in self.made:
                    plan.append((ARG_COPY, s))
                elif k in self.cloned:
                    plan.append((SHARE if s in handed else CLONE, s))
                else:
                    plan.append((VAL, s))
            plans[cloned] = plan
        self.actions = plans


ARG, ARG_COPY, SHARE, CLONE, VAL = range(5)  # `_replay`'s actions, per result


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
            f"handed out without a copy while earlier ones are dropped, up to {RING} captures, "
            "then cloned)")
