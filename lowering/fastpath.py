"""The cached-call fast path: for an entry whose arguments are plain
positional arrays/floats and whose program is a CPU program, generate one
straight-line Python function — guard, allocations, kernel launches, results —
so a cached call does no generic work (no pytree walk, no plan
interpretation). Anything it cannot handle returns MISS and takes the
general path.

Where the entry is all exact ndarrays, allocations and single-threaded
kernels, the call is compiled once more, natively (`lowering/codegen/entry.py`,
`runtime/native.py`): a builtin whose guard misses tail-call the Python
function below, so both always agree. `LOWERING_NATIVE_ENTRY=0` turns it off."""

from __future__ import annotations

import ctypes
import itertools
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

MISS = object()
_entry_ids = itertools.count()


def flat_positional(treedef: Any, n: int) -> bool:
    return treedef == (tuple, ((tuple, (None,) * n), (dict, (), ())))


def keyword_call(treedef: Any, n: int) -> tuple[int, tuple[str, ...]] | None:
    """(positional count, keyword names) of a call of n array leaves passed
    positionally and by keyword, or None for another structure."""
    if not (isinstance(treedef, tuple) and len(treedef) == 2 and treedef[0] is tuple):
        return None
    args, kwargs = treedef[1]
    if (args[0] is not tuple or any(d is not None for d in args[1]) or kwargs[0] is not dict
            or any(d is not None for d in kwargs[2]) or not all(type(k) is str for k in kwargs[1])):
        return None
    if len(args[1]) + len(kwargs[1]) != n:
        return None
    return len(args[1]), tuple(kwargs[1])


def access(treedef: Any) -> tuple[list[str], list[str], dict[str, Any]] | None:
    """How a call's leaves are read off `fast(*A, **K)` for a call of this
    structure (keyword arguments, nested tuples, lists, dicts and
    namedtuples): the checks that the call has it (types, lengths, keys in
    order: a dict's order is part of its structure), each leaf's expression,
    and the names the checks use; None for a structure it does not read (a
    registered node, a key that is not a str or int)."""
    conds: list[str] = []
    exprs: list[str] = []
    ns: dict[str, Any] = {}

    def walk(td, at: str) -> bool:
        if td is None:
            exprs.append(at)
            return True
        t = td[0]
        if t is dict:
            keys, kids = td[1], td[2]
            if not all(type(k) in (str, int) for k in keys):
                return False
            conds.append(f"type({at}) is dict and tuple({at}) == {tuple(keys)!r}")
            return all(walk(d, f"{at}[{k!r}]") for k, d in zip(keys, kids))
        if len(td) != 2 or not isinstance(t, type) or not issubclass(t, (tuple, list)):
            return False
        name = f"T{len(ns)}"
        ns[name] = t
        conds.append(f"type({at}) is {name} and len({at}) == {len(td[1])}")
        return all(walk(d, f"{at}[{i}]") for i, d in enumerate(td[1]))

    if not (isinstance(treedef, tuple) and len(treedef) == 2 and treedef[0] is tuple
            and len(treedef[1]) == 2):
        return None
    args, kwargs = treedef[1]
    if args[0] is not tuple or kwargs[0] is not dict:
        return None
    conds.append(f"len(A) == {len(args[1])}")
    if not all(walk(d, f"A[{i}]") for i, d in enumerate(args[1])):
        return None
    if not walk(kwargs, "K"):
        return None
    return conds, exprs, ns


def render(treedef: Any, values: list[str], ns: dict[str, Any]) -> str | None:
    """The expression that builds a result of this structure from its
    leaves' expressions (in order); None for one it does not build."""
    it = iter(values)

    def build(td) -> str | None:
        if td is None:
            return next(it)
        t = td[0]
        if t is dict:
            if not all(type(k) in (str, int) for k in td[1]):
                return None
            parts = [build(d) for d in td[2]]
            if None in parts:
                return None
            return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(td[1], parts)) + "}"
        if len(td) != 2 or not isinstance(t, type) or not issubclass(t, (tuple, list)):
            return None
        parts = [build(d) for d in td[1]]
        if None in parts:
            return None
        if t is tuple:
            return "(" + "".join(f"{v}, " for v in parts) + ")"
        if t is list:
            return "[" + ", ".join(parts) + "]"
        name = f"R{len(ns)}"
        ns[name] = t  # a namedtuple
        return f"{name}(" + ", ".join(parts) + ")"

    return build(treedef)


def make_fast_call(guards, treedef, leaves: list, trace, prog, paths=(),
                   gvals=(), swap=None) -> Callable | None:
    """The entry's cached call as one generated function (or, where it
    applies, a native builtin in front of it); None where the entry is not
    plain enough: see the module's docstring. `paths`: the Python state the
    entry reads (a helper function of the module, an attribute), evaluated
    in the call as the entry's `fetch` evaluates them (`gvals`: their values
    when traced). A failure in making it is logged ("perf") and leaves the
    entry to the general path, which answers the same. `swap(old, new)`:
    where the caller's fast call is `old`, make it `new` (an entry of many
    sizes puts the native builtin of the sizes called last in front:
    `_dynamic_fast_call`)."""
    try:
        return _make_fast_call(guards, treedef, leaves, trace, prog, paths, gvals, swap)
    except Exception:  # noqa: BLE001 - an optimization's bug costs speed, not the call
        from .config import logger

        logger("perf").warning("no fast call for this entry (its generation failed)",
                               exc_info=True)
        return None


def _make_fast_call(guards, treedef, leaves: list, trace, prog, paths, gvals,
                    swap=None) -> Callable | None:
    from runtime import native

    from .backends.cpu_dynamic import DynamicProgram

    n = len(leaves)
    plan = trace.plan
    if isinstance(prog, DynamicProgram):
        if (not _plain(trace, prog, treedef, n, len(paths)) or not flat_positional(treedef, n)
                or any(c.where != "L" for c in guards.checks)):
            return None
        return _dynamic_fast_call(guards, leaves, trace, prog, n, swap)
    if not _plain(trace, prog, treedef, n, 0):
        return None
    seg = trace.segments[0]
    outs = _outputs(plan, prog, seg.bindings, trace.owners)
    body = _FastBody(prog)
    if outs is None or not body.bind(seg.bindings, list(leaves) + list(gvals), n):
        return None
    ret = body.result(outs, plan.treedef)
    if ret is None or not body.write_back(plan, seg.bindings):
        return None
    fast = body.compile(guards, n, ret, treedef, paths)
    if fast is None:
        return None
    flat_out = plan.treedef is None or plan.treedef == (tuple, (None,) * len(outs))
    call = keyword_call(treedef, n)
    # (writes into arguments, or arguments returned: flat calls, no Python state read)
    special = bool(plan.writebacks) or any(isinstance(s, tuple) for s, _ in outs)
    if native.enabled() and call is not None and flat_out and not (special and paths):
        entry = _native_entry(guards, n, seg.bindings, prog, outs, plan.treedef is not None, fast,
                              *call, writebacks=plan.writebacks)
        if entry is not None:
            return entry
    elif native.enabled() and not paths and not special:
        nested = _nested_native(body, guards, n, seg.bindings, prog, outs, plan.treedef,
                                treedef, call)
        if nested is not None:
            return nested
    return fast


def _nested_native(body, guards, n: int, bindings, prog, outs, out_tree, treedef,
                   call: tuple[int, tuple[str, ...]] | None) -> Callable | None:
    """For nested arguments (a dict, lists, namedtuples) or a nested result:
    a generated call around the native builtin of the flat call (whose miss
    path is the flat Python call, whose miss is MISS), so that the leaves'
    guards run natively, not in Python. Nested arguments: the call checks
    their structure and hands the leaves to the builtin; flat ones
    (positional or keywords, `call`) go to it as they came. A nested result
    (a dict, a list, a namedtuple of results): the builtin returns the flat
    tuple of the results, the call builds the structure. None where the
    arguments' structure is not one `access` reads, the result's not one
    `render` builds, or no native builtin applies."""
    flat_out = out_tree is None or out_tree == (tuple, (None,) * len(outs))
    ns: dict[str, Any] = {"MISS": MISS}
    if flat_out:
        ret = body.result(outs, out_tree)
        build = None
    else:
        ret = body.result(outs, (tuple, (None,) * len(outs)))
        build = render(out_tree, [f"r[{i}]" for i in range(len(outs))], ns)
        if build is None:
            return None
    if call is not None:  # flat arguments: the builtin takes them as they come
        inner = body.compile(guards, n, ret, treedef)
        head, pass_on = ["def fast(*A, **K):"], "*A, **K"
    else:
        read = access(treedef)
        if read is None:
            return None
        shape, exprs, names = read
        ns.update(names)
        inner = body.compile(guards, n, ret, (tuple, ((tuple, (None,) * n), (dict, (), ()))))
        call = (n, ())
        head = ["def fast(*A, **K):", "    if not (" + " and ".join(shape) + "):",
                "        return MISS"]
        pass_on = ", ".join(exprs)
    if inner is None:
        return None
    entry = _native_entry(guards, n, bindings, prog, outs, not flat_out or out_tree is not None,
                          inner, *call)
    if entry is None:
        return None
    ns["NATIVE"] = entry
    if build is None:
        lines = head + [f"    return NATIVE({pass_on})"]
    else:
        lines = head + [f"    r = NATIVE({pass_on})", "    if r is MISS:", "        return MISS",
                        f"    return {build}"]
    src = "\n".join(lines) + "\n"
    exec(compile(src, "<lowering nested call>", "exec"), ns)
    fast = ns["fast"]
    fast.source = src  # type: ignore[attr-defined]
    fast.native = entry  # type: ignore[attr-defined]  (kept alive with the call)
    return fast


def _plain(trace, prog, treedef, n: int, n_globals: int) -> bool:
    """A CPU program of one graph, called with arguments whose structure the
    fast call reads (`access`), reading no Python state and writing back
    into arguments only (`x *= y`: the program's result copied into the
    argument, `_FastBody.write_back`), not into the state it reads."""
    from .backends.cpu_backend import CpuProgram
    from .backends.cpu_dynamic import DynamicProgram

    return (isinstance(prog, (CpuProgram, DynamicProgram)) and not n_globals and not trace.breaks
            and all(src < n for src, _ in trace.plan.writebacks)
            and access(treedef) is not None and len(trace.segments) == 1)


def _copied(a: np.ndarray) -> np.ndarray:
    return a.copy()


def _outputs(plan, prog, bindings=None, owners=None) -> list | None:
    """(slot, conversion) per result — None, or a callable making the result
    of the buffer (a view of it: `out.reshape(...).transpose(...)`; a 0-d
    array returned as its scalar) —, or None unless every result is a
    distinct buffer the program allocates, an argument written in place, or
    (given the program's `bindings` and the trace's `owners`) an argument
    the program returns unchanged: ("L", leaf) in place of the slot.""" 
    from .backends.cpu_backend import AllocStep

    alloc_slots = {st.slot for st in prog.steps if isinstance(st, AllocStep)}
    written = {idx: src for src, idx in plan.writebacks}
    outs = []
    for leaf in plan.leaves:
        if leaf[0] == "const" and leaf[1] is None:  # (a function that returns nothing)
            outs.append((("None",), None))
            continue
        if leaf[0] != "out":
            return None
        if leaf[1] in written:  # (the argument itself, written back: `x *= y; return x`)
            outs.append((("L", written[leaf[1]]), _conversion(leaf[2], leaf[3])))
            continue
        slot = prog.outputs[leaf[1]]
        if slot not in alloc_slots:
            # an argument the program returns as it came: the argument itself
            # where it is the result's storage (`return x`, `x.T`, `x[1:]`:
            # numpy's object or view of it), else a copy of it (`np.array(x)`,
            # `x.astype(x.dtype)`: numpy's new array), as the general path's
            # `fresh_results` makes them
            if bindings is None or not (slot < len(bindings) and type(bindings[slot]) is int):
                return None
            conv = _conversion(leaf[2], leaf[3])
            if owners is not None and leaf[1] < len(owners) and owners[leaf[1]] == slot:
                outs.append((("L", bindings[slot]), conv))
            else:
                outs.append((("L", bindings[slot]), _copied if conv is None
                             else (lambda a, conv=conv: conv(_copied(a)))))
            continue
        outs.append((slot, _conversion(leaf[2], leaf[3])))
    held = [s for s, _ in outs if s != ("None",)]
    if len(set(held)) != len(held) or len(prog.outputs) != len(set(prog.outputs)):
        return None
    return outs


class _FastBody:
    """The generated fast call's source, line by line, and the namespace of
    the objects it names (kernels, pointer arrays, buffers, dtypes)."""

    def __init__(self, prog):
        from runtime import cpu, errors
        from runtime.memory import POOL

        self.prog = prog
        self.ns: dict[str, Any] = {
            "MISS": MISS, "np": np, "asarray": np.asarray, "f64": np.float64,
            "lock": prog._lock, "launch": cpu.launch, "pool_empty": POOL.empty,
            "empty": np.empty, "check": errors.check, "collector": prog.collector,
            # the program stays alive with its fast call: the source names the
            # address of its launch scalars (a program for one set of sizes of
            # a dynamic entry can be dropped from the entry's cache meanwhile)
            "program": prog}
        self.lines: list[str] = []
        # the IEEE exceptions raised (MXCSR bits): assigned, then or-ed
        self.fl = "fl ="

    def bind(self, bindings, sources: list, n: int) -> bool:
        """The program's inputs from the arguments and the state read (`G`,
        sources from n on): a float as a 0-d float64, a numpy scalar as a
        0-d array; False where an input is neither (a random draw)."""
        for i, b in enumerate(bindings):
            if not isinstance(b, int):
                return False
            x = sources[b]
            src = f"L[{b}]" if b < n else f"G[{b - n}]"
            if isinstance(x, float):
                self.lines.append(f"    v{i} = asarray({src}, f64)")
            elif isinstance(x, np.generic):
                self.lines.append(f"    v{i} = asarray({src})")
            else:
                self.lines.append(f"    v{i} = {src}")
        return True

    def write_back(self, plan, bindings) -> bool:
        """The program's steps (`run_steps`), then each result the function
        wrote into an argument copied into it (`x *= y`), as the general
        path's `apply_plan` does after the program ran (its IEEE flags
        checked first); False where a written result is neither a buffer
        the program allocates nor the argument's own buffer."""
        from .backends.cpu_backend import AllocStep

        alloc_slots = {st.slot for st in self.prog.steps if isinstance(st, AllocStep)}
        copies = []
        for src, idx in plan.writebacks:
            slot = self.prog.outputs[idx]
            if slot in alloc_slots:
                copies.append(f"    L[{src}][...] = v{slot}")
            elif (other := _other_argument(plan.writebacks, bindings, slot, src)) is not None:
                copies.append(f"    L[{src}][...] = L[{other}]")  # (`a[...] = b`: numpy's copy)
            elif not (slot < len(bindings) and bindings[slot] == src):
                return False  # (the argument's own buffer: written in place, nothing to copy)
        self.run_steps()
        self.lines += copies
        return True

    def run_steps(self) -> None:
        """The program's steps under its lock, each buffer dropped after its
        last use, then the IEEE flags checked where anything ran."""
        from .backends.cpu_backend import AllocStep, KernelStep

        if not self.prog.steps:  # (nothing to run: `np.positive(x, out=x)`)
            return
        undo = getattr(self.prog, "undo", ())
        self.lines.append("    with lock:")
        start = len(self.lines)
        for k, st in enumerate(self.prog.steps):
            if undo:
                self.lines.append(f"        step = {k}")
            if isinstance(st, AllocStep):
                self.alloc(k, st)
            elif isinstance(st, KernelStep):
                self.kernel(k, st)
            else:
                self.extern(k, st)
            for slot in self.prog.dead_after[k]:
                self.lines.append(f"        v{slot} = None")  # back to the pool (memory plan)
        if not undo:
            if self.fl != "fl =":  # (where kernels or externs ran)
                self.lines += ["    if fl:", "        check(fl)"]
            return
        # arguments written in place: their old values copied back from the
        # undo buffers where the call fails (`CpuProgram._undo`)
        body = ["    " + line for line in self.lines[start:]]
        body.append(f"            step = {len(self.prog.steps)}")
        if self.fl != "fl =":
            body += ["            if fl:", "                check(fl)"]
        restore = [line for u, a, k, t in reversed(undo)
                   for line in (f"            if step > {k}:",
                                f"                v{a}[...] = v{u}{'.T' if t else ''}")]
        self.lines[start:] = ["        try:", *body, "        except BaseException:", *restore,
                              "            raise"]

    def alloc(self, k: int, st) -> None:
        from runtime.memory import pooled

        if st.static is not None:  # the program's own buffer
            self.ns[f"S{k}"] = st.static
            self.lines.append(f"        v{st.slot} = S{k}")
            return
        d = self.ns[f"D{k}"] = np.dtype(st.dtype)
        nbytes = d.itemsize * int(np.prod(st.shape, dtype=np.int64))
        alloc = "pool_empty" if pooled(nbytes) else "empty"
        self.lines.append(f"        v{st.slot} = {alloc}({tuple(st.shape)!r}, D{k})")

    def kernel(self, k: int, st) -> None:
        from runtime import blas, cpu

        # one thread: call without releasing the GIL (cheaper for small work;
        # a big BLAS product releases it, as numpy's matmul does)
        serial = st.threads <= 1 and st.flops < blas.SMALL_FLOPS
        self.ns[f"K{k}"] = cpu.serial_entry(st.fn) if serial else st.fn
        self.ns[f"P{k}"] = st.ptrs
        for j, s in enumerate(st.bufs):
            self.lines.append(f"        P{k}[{j}] = id(v{s})")
        scalars = str(st.scalars_address)  # (status words and parameters, or None)
        checked = st.checks is not None and st.work > 0
        if checked:  # index checks: the status words
            self.ns[f"C{k}"], self.ns[f"W{k}"] = st.checks, st.checks.status
            self.lines.append(f"        W{k}[0] = 0")
        if st.work > 0 and serial:
            self.lines.append(f"        {self.fl} K{k}(0, {st.work}, P{k}, {scalars})")
        elif st.work > 0:
            self.lines.append(f"        {self.fl} launch(K{k}, {st.work}, P{k}, {scalars}, "
                              f"{st.threads}, {self.prog.linger})")
        self.fl = "fl |=" if st.work > 0 else self.fl
        if checked:
            self.lines.append(f"        if W{k}[0]: raise C{k}.error()")

    def extern(self, k: int, st) -> None:
        """A numpy routine, its floating-point flags collected as numpy
        detects them."""
        self.ns[f"X{k}"] = st.run
        self.lines += ["        token = collector.enter()",
                       "        try:",
                       f"            X{k}(" + ", ".join(f"v{i}" for i in st.args) + ")",
                       "        finally:",
                       "            collector.exit(token)",
                       f"        {self.fl} collector.bits"]
        self.fl = "fl |="

    def result(self, outs: list, treedef) -> str | None:
        """The return statement: one output, or a flat tuple of them (each
        made of its buffer by its conversion); None for another structure."""
        res = []
        for k, (slot, conv) in enumerate(outs):
            value = (f"v{slot}" if not isinstance(slot, tuple) else "None" if slot[0] == "None"
                     else f"L[{slot[1]}]")
            if conv is not None:
                self.ns[f"Y{k}"] = conv
                res.append(f"Y{k}({value})")
            else:
                res.append(value)
        if treedef is None:
            return f"    return {res[0]}"
        built = render(treedef, res, self.ns)
        return None if built is None else f"    return {built}"

    def compile_body(self, ret: str) -> Callable:
        """`def body(L)`: the body alone (the caller checked the guards)."""
        src = "\n".join(["def body(L):"] + self.lines + [ret]) + "\n"
        exec(compile(src, "<lowering fast body>", "exec"), self.ns)
        return self.ns["body"]

    def compile(self, guards, n: int, ret: str, treedef: Any, paths=()) -> Callable | None:
        """`def fast(*L)`: the entry's guards inlined (flat positional
        arguments: the structure check is the argument count; a mutating
        entry's overlap check is one of its checks), a miss returning MISS,
        then the body. Other structures (`access`): `def fast(*A, **K)`, the
        structure checked, the leaves read into L, then the same. The state the entry reads
        (`paths`) is read into G first, as its `fetch` reads it (a path gone:
        a miss). None where it reads none."""
        from runtime.guards import render_checks

        state = []
        if paths:
            values = ", ".join(p.expr(self.ns) for p in paths)
            state = ["    try:", f"        G = [{values}]", "    except Exception:",
                     "        return MISS"]
        if flat_positional(treedef, n):
            conds = render_checks(guards.checks, self.ns)
            head = (["def fast(*L):", f"    if len(L) != {n}:", "        return MISS"]
                    + (["    R = (L, {})"] if paths else []) + state
                    + ["    if not (" + " and ".join(conds or ["True"]) + "):", "        return MISS"])
        else:  # keywords, nested arguments: their structure first, then the leaves' guards
            read = access(treedef)
            if read is None:
                return None
            shape, exprs, names = read
            self.ns.update(names)
            conds = render_checks(guards.checks, self.ns)
            head = ["def fast(*A, **K):", "    if not (" + " and ".join(shape) + "):",
                    "        return MISS", "    L = (" + "".join(f"{e}, " for e in exprs) + ")"]
            head += (["    R = (A, K)"] if paths else []) + state + [
                "    if not (" + " and ".join(conds or ["True"]) + "):", "        return MISS"]
        src = "\n".join(head + self.lines + [ret]) + "\n"
        exec(compile(src, "<lowering fast call>", "exec"), self.ns)
        fast = self.ns["fast"]
        fast.source = src  # type: ignore[attr-defined]
        return fast


# per dynamic entry, the fast bodies kept (one per set of sizes, most recent)
DYNAMIC_BODIES = 16
# a set of sizes gets its native builtin (`_dynamic_fast_call`) on this
# call of it: making one takes ~15 ms (the entry's IR, then LLVM), a call
# through it saves ~3.5 us against the Python call (8x8 `a + b`: 0.9 us
# against 4.1): bought once the calls without it cost what it costs (at
# most twice the best choice made knowing how many calls come), not on a
# size's first call (0.4 ms a new size, 20 with its builtin)
NATIVE_AFTER_CALLS = 4096


def _dynamic_fast_call(guards, leaves: list, trace, prog, n: int, swap=None) -> Callable | None:
    """The fast call of an entry compiled with size symbols: its guards
    (sizes and their relations) inlined, then the call's sizes pick the fast
    body generated for them (made on a size set's first call from the plan
    instantiated for it, `DynamicProgram.program_for`).

    A set of sizes called often (`NATIVE_AFTER_CALLS`) gets a native builtin
    (`_sized_native`: the static entry's, its guards those sizes): a call of
    those sizes makes it the caller's fast call (`swap`), its fallback this
    call: calls of one size run natively (0.9 us for an 8x8 `a + b`, 4.1
    through this call), a call of other sizes misses it (a few native
    compares) into this call, which puts their builtin in front."""
    from runtime import native
    from runtime.guards import render_checks

    seg = trace.segments[0]
    plan = trace.plan
    if not all(isinstance(b, int) for b in seg.bindings):
        return None
    where = [(seg.bindings[i], d) for _, i, d in prog.bindings]
    first = tuple(leaves[b].shape[d] for b, d in where)
    outs = _outputs(plan, prog.program_for(first))
    if outs is None:
        return None
    bodies: dict[tuple, Callable] = {}
    lock = threading.Lock()

    def make(key: tuple) -> Callable:
        body = _FastBody(prog.program_for(key))
        body.bind(seg.bindings, leaves, len(leaves))
        ret = body.result(outs, plan.treedef)
        # (results written into arguments copied there, `x *= y`: where the
        # program for these sizes leaves one it cannot copy, the general path)
        fn = body.compile_body(ret) if body.write_back(plan, seg.bindings) else _missing
        with lock:  # (calls on several threads)
            if len(bodies) >= DYNAMIC_BODIES:
                bodies.pop(next(iter(bodies)))
            return bodies.setdefault(key, fn)

    if _FastBody(prog.program_for(first)).result(outs, plan.treedef) is None:
        return None  # (a structure of results the fast call does not build)
    make(first)
    natives: dict[tuple, Callable | None] = {}
    calls: dict[tuple, int] = {}
    front = [None, None]  # the sizes whose builtin is the caller's fast call, and it
    flat_out = plan.treedef is None or plan.treedef == (tuple, (None,) * len(outs))

    def to_front(key: tuple, L: tuple) -> None:
        """Put the builtin of these sizes in front: made on their
        NATIVE_AFTER_CALLS-th call (None where the static entry would have
        none), then swapped in on each return to them."""
        if key not in natives:
            k = calls[key] = calls.get(key, 0) + 1
            if k < NATIVE_AFTER_CALLS:
                return
            nat = None
            if flat_out:
                nat = _sized_native(guards, L, n, seg.bindings, prog.program_for(key), outs,
                                    plan, ns["fast"])
            with lock:
                if len(natives) >= DYNAMIC_BODIES:
                    natives.pop(next(iter(natives)))
                natives[key] = nat
                calls.pop(key, None)
                if len(calls) > 4 * DYNAMIC_BODIES:  # (sizes called a few times each)
                    calls.clear()
        nat = natives.get(key)
        if nat is None:
            return
        swap(front[1] or ns["fast"], nat)
        front[:] = [key, nat]

    sized = swap is not None and native.enabled()
    ns: dict[str, Any] = {"MISS": MISS, "bodies": bodies, "make": make, "front": front,
                          "to_front": to_front}
    conds = [f"len(L) == {n}"] + render_checks(guards.checks, ns)
    key = "(" + "".join(f"L[{b}].shape[{d}], " for b, d in where) + ")"
    src = "\n".join([
        "def fast(*L):",
        "    if not (" + " and ".join(conds) + "):",
        "        return MISS",
        f"    k = {key}",
        *(["    if k != front[0]:", "        to_front(k, L)"] if sized else []),
        "    b = bodies.get(k)",
        "    if b is None:",
        "        b = make(k)",
        "    return b(L)"]) + "\n"
    exec(compile(src, "<lowering fast call (sizes)>", "exec"), ns)
    fast = ns["fast"]
    fast.source = src  # type: ignore[attr-defined]
    fast.natives = natives  # type: ignore[attr-defined]
    return fast


def _sized_native(guards, L: tuple, n: int, bindings, prog, outs, plan,
                  fallback: Callable) -> Callable | None:
    """The native builtin of a dynamic entry's program for the sizes of the
    call `L` (which passed the entry's guards): the entry's checks with
    each array's shape that call's (a relation of sizes holds for them), as
    a static entry of that program has; None where one has no native form."""
    from dataclasses import replace
    from types import SimpleNamespace

    from runtime.guards import ArrayCheck, RelationCheck

    checks = []
    for c in guards.checks:
        if isinstance(c, RelationCheck):
            continue  # (the shapes below are sizes it held for)
        if isinstance(c, ArrayCheck):
            c = replace(c, shape=tuple(int(d) for d in L[c.index].shape))
        checks.append(c)
    return _native_entry(SimpleNamespace(checks=checks), n, bindings, prog, outs,
                         plan.treedef is not None, fallback, n, (),
                         writebacks=plan.writebacks)


def _missing(L) -> object:
    return MISS


def _native_writebacks(guards, bindings, prog, writebacks):
    """For a native entry: the pairs of arguments its overlap check keeps
    apart, as (a, nbytes, b, nbytes), and the copies of its results into
    its arguments, as (argument, slot, nbytes) — ((), ()) for an entry that
    writes nothing —, or None where they have no native form (an array of
    the check whose memory does not run from its data pointer: a negative
    stride; a copy not between C-contiguous arrays of one shape and dtype)."""
    from runtime.guards import OverlapCheck

    from .backends.cpu_backend import AllocStep

    arrays = _argument_arrays(guards)

    def nbytes(arg: int, layouts=("C",)) -> int | None:
        return _nbytes(arrays.get(arg), layouts)

    def extent(arg: int) -> int | None:
        """The bytes from the array's data pointer to past its last element
        (C or F: all of its memory; strided, strides not negative: the
        bounds numpy's `may_share_memory` compares), or None."""
        c = arrays.get(arg)
        if c is None or not all(type(d) is int for d in c.shape):
            return None
        if c.layout in ("C", "F"):
            return nbytes(arg, (c.layout,))
        strides = c.layout[1] if isinstance(c.layout, tuple) else None
        if strides is None or any(st < 0 for st in strides):
            return None
        if 0 in c.shape:
            return 0
        return c.dtype.itemsize + sum((d - 1) * st for d, st in zip(c.shape, strides))

    apart = []
    for check in guards.checks:
        if not isinstance(check, OverlapCheck):
            continue
        if any(w != "L" for w, _, _ in check.arrays):
            return None
        idx = [i for _, i, _ in check.arrays]
        sizes = [extent(i) for i in idx]
        if any(z is None for z in sizes):
            return None
        apart += [(idx[a], sizes[a], idx[b], sizes[b])
                  for a in range(check.n_written) for b in range(a + 1, len(idx))]
    allocs = {st.slot: st for st in prog.steps if isinstance(st, AllocStep)}
    copied = []
    for src, k in writebacks:
        slot = prog.outputs[k]
        size, c = nbytes(src), arrays.get(src)
        if slot in allocs:
            shape, dtype = tuple(allocs[slot].shape), np.dtype(allocs[slot].dtype)
        elif (other := _other_argument(writebacks, bindings, slot, src)) is not None:
            # (`a[...] = b`: b's memory copied into a's, both C-contiguous)
            o = arrays.get(other)
            if o is None or nbytes(other) is None:
                return None
            shape, dtype = tuple(o.shape), o.dtype
        elif slot < len(bindings) and bindings[slot] == src:
            continue  # (the argument's own buffer, written in place)
        else:
            return None
        if size is None or shape != tuple(c.shape) or not c.writeable or dtype != c.dtype:
            return None
        copied.append((src, slot, size))
    return tuple(apart), tuple(copied)


def _native_undo(guards, bindings, prog, launches) -> tuple | None:
    """For a native entry: (argument slot, undo slot, nbytes, restore) per
    argument its kernels write in place keeping old values
    (`CpuProgram.undo`), restored where the flags' check raises: a memcpy
    where the undo buffer holds the argument's bytes in its memory order (a
    C-ordered one's values; an F-ordered one's transpose, C-ordered: the
    same bytes), else numpy's assignment called back (`UNDO_RESTORE`: a
    strided argument); None where a program can fail elsewhere after a
    kernel ran (a numpy routine called back, an index checked)."""
    from .backends.cpu_backend import UNDO_RESTORE
    from .codegen.entry import Call

    undo = getattr(prog, "undo", ())
    if not undo:
        return ()
    if any(isinstance(k, Call) or k.checked for k in launches):
        return None
    arrays = _argument_arrays(guards)
    out = []
    for u, a, _, transposed in undo:
        c = arrays.get(bindings[a]) if a < len(bindings) and type(bindings[a]) is int else None
        size = _nbytes(c, ("F" if transposed else "C",))
        if size is not None:
            out.append((a, u, size, 0))
        elif c is not None:
            out.append((a, u, 0, id(UNDO_RESTORE[transposed])))
        else:
            return None
    return tuple(out)


def _argument_arrays(guards) -> dict:
    """The array guards on the call's arguments, by argument."""
    from runtime.guards import ArrayCheck

    return {c.index: c for c in guards.checks if isinstance(c, ArrayCheck) and c.where == "L"}


def _nbytes(c, layouts=("C",)) -> int | None:
    """The bytes of the array an array guard `c` pins, where it pins one of
    `layouts` and every size; else None."""
    if c is None or c.layout not in layouts or not all(type(d) is int for d in c.shape):
        return None
    return c.dtype.itemsize * int(np.prod(c.shape, dtype=np.int64))


def _other_argument(writebacks, bindings, slot: int, src: int) -> int | None:
    """The argument a result written into argument `src` is, unchanged
    (`a[...] = b`: the program returns b's input), or None: one the call
    writes into none of its arguments (its copy, made after the program
    ran, reads it as it came)."""
    if not (slot < len(bindings) and type(bindings[slot]) is int) or bindings[slot] == src:
        return None
    other = bindings[slot]
    return None if any(d == other for d, _ in writebacks) else other


def _conversion(steps: tuple, scalar) -> Callable | None:
    """The result made of its buffer as `apply_plan` makes it: the view
    steps applied, then a 0-d array as its scalar (True: numpy's scalar;
    a type: a Python scalar of it, a float the function computed from
    Python floats). None: the buffer itself."""
    if not steps and not scalar:
        return None
    from .capture.views import TransposeStep, np_apply_all

    if (not scalar and len(steps) == 1 and isinstance(steps[0], TransposeStep)
            and list(steps[0].perm) == list(range(len(steps[0].perm) - 1, -1, -1))):
        return np.ndarray.transpose  # (`a.T`: a C call from the native entry, no frame)

    if not scalar:
        return lambda a: np_apply_all(steps, a)
    if scalar is True:
        return lambda a: np_apply_all(steps, a)[()]
    return lambda a: scalar(np_apply_all(steps, a)[()])


def _quiet(run: Callable) -> Callable:
    """An extern's routine numpy reports no IEEE flag from (`routines.QUIET`:
    a sort): run without the flags' collector, no flags returned."""
    def call(*arrs):
        run(*arrs)
        return 0
    return call


def _flagged(run: Callable, collector) -> Callable:
    """An extern's routine that returns the IEEE flags numpy saw in it."""
    def call(*arrs):
        token = collector.enter()
        try:
            run(*arrs)
        finally:
            collector.exit(token)
        return collector.bits
    return call


def _native_entry(guards, n: int, bindings, prog, outs, as_tuple: bool, fast,
                  nargs: int, kwnames: tuple[str, ...], writebacks=()) -> Callable | None:
    """The native builtin for this entry, or None where it does not apply:
    an argument that is neither an exact ndarray of a canonical dtype nor a
    Python float or specialized int, bool or None, a multi-threaded kernel,
    a big BLAS product. (A numpy extern, an output's conversion — a view, a
    scalar — are called back; an index out of range goes to the fast call.)
    An entry that writes into its arguments (`writebacks`: (argument, output
    index) pairs, `x *= y`) copies each result into its argument once the
    program succeeded, as the fast call does, where every array of its
    overlap check runs from its data pointer (the check is then one of
    byte ranges), and a copied result is a C-contiguous argument's shape."""
    from runtime import blas, errors, native
    from runtime.memory import POOL, pooled

    from . import routines
    from .backends.cpu_backend import AllocStep, KernelStep
    from .codegen.entry import FLAG_VALUES, Alloc, Call, EntrySpec, Launch, arg_checks, entry_ir

    pool_empty = POOL.empty  # one bound method: the entry embeds its address
    derived = arg_checks(guards.checks)
    if derived is None:
        return None
    checks, descrs = derived
    keep: list = [pool_empty, *descrs]
    if sorted({c.arg for c in checks}) != list(range(n)):
        return None
    copies = _native_writebacks(guards, bindings, prog, writebacks)
    if copies is None:
        return None
    apart, copied = copies
    sources = tuple(("arg", s[1]) if isinstance(s, tuple) and s[0] == "L"
                    else ("none", 0) if isinstance(s, tuple) else ("slot", s) for s, _ in outs)
    converts: list[int] = []
    for _, conv in outs:  # (a view of a buffer, a 0-d result returned as a scalar)
        keep.append(conv)
        converts.append(0 if conv is None else id(conv))
    allocs, launches = [], []
    for st in prog.steps:
        if isinstance(st, AllocStep):
            slot, shape, dtype, static = st.slot, st.shape, st.dtype, st.static
            d, shape = np.dtype(dtype), tuple(int(s) for s in shape)
            keep += [d, shape, static]
            call = None
            if static is not None:  # the program's own buffer: handed back as it is
                allocs.append(Alloc(slot, shape, id(d), None, id(static)))
                continue
            if pooled(d.itemsize * int(np.prod(shape, dtype=np.int64))):
                call = (id(pool_empty), id(shape), id(d))
            allocs.append(Alloc(slot, shape, id(d), call))
        elif isinstance(st, KernelStep):
            fn, bufs, work, threads, index_checks = st.fn, st.bufs, st.work, st.threads, st.checks
            if threads > 1:
                return None
            if st.flops >= blas.SMALL_FLOPS:  # (a big product runs without the GIL: not here)
                return None
            keep += [fn, st.scalars]
            # (an index out of range: the entry hands the call to the Python
            # fast call, which runs it again and raises numpy's IndexError)
            launches.append(Launch(ctypes.cast(fn, ctypes.c_void_p).value, tuple(bufs), work,
                                   st.scalars_address or 0, index_checks is not None))
        else:  # a numpy routine: called back, its flags returned as numpy detects them
            call = (_quiet(st.run) if getattr(st.run, routines.QUIET, False)
                    else _flagged(st.run, prog.collector))
            keep.append(call)
            launches.append(Call(id(call), tuple(st.args)))
    undo = _native_undo(guards, bindings, prog, launches)
    if undo is None:
        return None
    locking = any(isinstance(k, Call) for k in launches)
    acquire, release = prog._lock.acquire, prog._lock.release  # (bound methods: kept alive)
    keep += [acquire, release]
    name = f"lowering_entry_{next(_entry_ids)}"
    flag_ints = list(range(FLAG_VALUES))  # kept alive: the entry embeds their addresses
    keep += [errors.check, flag_ints]
    names = [sys.intern(k) for k in kwnames]  # (a call site's names are interned: by identity)
    keep += names
    f64 = np.dtype(np.float64)
    keep.append(f64)
    spec = EntrySpec(name, nargs, tuple(checks), tuple(bindings), tuple(allocs), tuple(launches),
                     sources, as_tuple, id(fast), id(errors.check), tuple(id(i) for i in flag_ints),
                     (id(acquire), id(release)) if locking else (),
                     tuple(id(k) for k in names), tuple(converts), id(f64), copied, apart,
                     undo)
    text = entry_ir(spec, native.abi())
    owner = native.NativeEntry(name, fast, keep, text, spec)
    return owner.builtin(native.jit_entry(text, name))
