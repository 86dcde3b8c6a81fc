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
from collections.abc import Callable
from typing import Any

import numpy as np

MISS = object()
_entry_ids = itertools.count()


def flat_positional(treedef: Any, n: int) -> bool:
    return treedef == (tuple, ((tuple, (None,) * n), (dict, (), ())))


def make_fast_call(guards, treedef, leaves: list, trace, prog, n_globals: int) -> Callable | None:
    from runtime import cpu, errors
    from runtime.guards import render_checks
    from runtime.memory import POOL, PAGE

    from .backends.cpu_backend import AllocStep, CpuProgram, KernelStep

    n = len(leaves)
    plan = trace.plan
    if (not isinstance(prog, CpuProgram) or n_globals or trace.breaks or plan.writebacks
            or not flat_positional(treedef, n) or len(trace.segments) != 1):
        return None
    seg = trace.segments[0]
    alloc_slots = {st.slot for st in prog.steps if isinstance(st, AllocStep)}
    outs = []
    for leaf in plan.leaves:
        if leaf[0] != "out" or leaf[2]:
            return None
        slot = prog.outputs[leaf[1]]
        if slot not in alloc_slots:
            return None
        outs.append((slot, leaf[3]))
    if len({s for s, _ in outs}) != len(outs) or len(prog.outputs) != len(set(prog.outputs)):
        return None
    ns: dict[str, Any] = {"MISS": MISS, "np": np, "ndarray": np.ndarray,
                          "asarray": np.asarray, "f64": np.float64, "lock": prog._lock,
                          "launch": cpu.launch, "pool_empty": POOL.empty, "empty": np.empty,
                          "check": errors.check, "collector": prog.collector}
    # the entry's guards, inlined (flat positional arguments: the structure
    # check is the argument count; no mutation: no overlap check)
    if any(c.where != "L" for c in guards.checks):
        return None
    conds = [f"len(L) == {n}"] + render_checks(guards.checks, ns)
    lines = ["def fast(*L):", "    if not (" + " and ".join(conds) + "):", "        return MISS"]
    for i, b in enumerate(seg.bindings):
        if not isinstance(b, int):
            return None
        x = leaves[b]
        if isinstance(x, float):
            lines.append(f"    v{i} = asarray(L[{b}], f64)")
        elif isinstance(x, np.generic):
            lines.append(f"    v{i} = asarray(L[{b}])")
        else:
            lines.append(f"    v{i} = L[{b}]")
    lines.append("    with lock:")
    fl = "fl ="  # the IEEE exceptions raised (MXCSR bits): assigned, then or-ed
    for k, st in enumerate(prog.steps):
        if isinstance(st, AllocStep) and st.static is not None:  # the program's own buffer
            ns[f"S{k}"] = st.static
            lines.append(f"        v{st.slot} = S{k}")
        elif isinstance(st, AllocStep):
            slot, shape, dtype = st.slot, st.shape, st.dtype
            ns[f"D{k}"] = np.dtype(dtype)
            nbytes = np.dtype(dtype).itemsize * int(np.prod(shape, dtype=np.int64))
            alloc = "pool_empty" if nbytes >= PAGE else "empty"
            lines.append(f"        v{slot} = {alloc}({tuple(shape)!r}, D{k})")
        elif isinstance(st, KernelStep):
            fn, bufs, work, threads, ptrs, checks = (st.fn, st.bufs, st.work, st.threads,
                                                     st.ptrs, st.checks)
            # one thread: call without releasing the GIL (cheaper for small work)
            ns[f"K{k}"] = cpu.serial_entry(fn) if threads <= 1 else fn
            ns[f"P{k}"] = ptrs
            for j, s in enumerate(bufs):
                lines.append(f"        P{k}[{j}] = id(v{s})")
            status = "None"
            if checks is not None and work > 0:
                ns[f"C{k}"], ns[f"W{k}"] = checks, checks.status
                status = str(checks.address)
                lines.append(f"        W{k}[0] = 0")
            if work > 0 and threads <= 1:
                lines.append(f"        {fl} K{k}(0, {work}, P{k}, {status})")
            elif work > 0:
                lines.append(f"        {fl} launch(K{k}, {work}, P{k}, {status}, {threads})")
            fl = "fl |=" if work > 0 else fl
            if status != "None":
                lines.append(f"        if W{k}[0]: raise C{k}.error()")
        else:
            run, idx = st.run, st.args
            ns[f"X{k}"] = run
            lines.append("        token = collector.enter()")  # numpy's flags, as it detects them
            lines.append("        try:")
            lines.append(f"            X{k}(" + ", ".join(f"v{i}" for i in idx) + ")")
            lines.append("        finally:")
            lines.append("            collector.exit(token)")
            lines.append(f"        {fl} collector.bits")
            fl = "fl |="
        for slot in prog.dead_after[k]:
            lines.append(f"        v{slot} = None")  # back to the pool (memory plan)
    if fl != "fl =":  # (where kernels or externs ran)
        lines.append("    if fl:")
        lines.append("        check(fl)")
    res = []
    for slot, scalar in outs:
        if scalar is True:
            res.append(f"v{slot}[()]")
        elif scalar:
            ns[f"Y{slot}"] = scalar
            res.append(f"Y{slot}(v{slot}[()])")
        else:
            res.append(f"v{slot}")
    if plan.treedef is None:
        lines.append(f"    return {res[0]}")
    elif plan.treedef == (tuple, (None,) * len(res)):
        lines.append(f"    return ({', '.join(res)}{',' if len(res) == 1 else ''})")
    else:
        return None
    src = "\n".join(lines) + "\n"
    exec(compile(src, "<lowering fast call>", "exec"), ns)
    fast = ns["fast"]
    fast.source = src  # type: ignore[attr-defined]
    from runtime import native

    if native.enabled():
        entry = _native_entry(guards, n, seg.bindings, prog, outs, plan.treedef is not None, fast)
        if entry is not None:
            return entry
    return fast


def _same(x):
    return x


def _native_entry(guards, n: int, bindings, prog, outs, as_tuple: bool, fast) -> Callable | None:
    """The native builtin for this entry, or None where it does not apply:
    an argument that is not an exact ndarray of a canonical dtype, an extern,
    a multi-threaded kernel or one that checks indices, an output converted
    to a Python scalar."""
    from runtime import errors, native
    from runtime.memory import PAGE, POOL

    from .backends.cpu_backend import AllocStep, KernelStep
    from .codegen.entry import FLAG_VALUES, Alloc, EntrySpec, Launch, arg_checks, entry_ir

    pool_empty = POOL.empty  # one bound method: the entry embeds its address
    derived = arg_checks(guards.checks)
    if derived is None:
        return None
    checks, descrs = derived
    keep: list = [pool_empty, *descrs]
    if guards.no_overlap or sorted(c.arg for c in checks) != list(range(n)):
        return None
    if any(scalar for _, scalar in outs):
        return None
    allocs, launches = [], []
    for st in prog.steps:
        if isinstance(st, AllocStep):
            slot, shape, dtype, static = st.slot, st.shape, st.dtype, st.static
            d, shape = np.dtype(dtype), tuple(int(s) for s in shape)
            keep += [d, shape, static]
            call = None
            if static is not None:  # the program's own buffer: handed back as it is
                call = (id(_same), id(static))
            elif d.itemsize * int(np.prod(shape, dtype=np.int64)) >= PAGE:
                call = (id(pool_empty), id(shape), id(d))
            allocs.append(Alloc(slot, shape, id(d), call))
        elif isinstance(st, KernelStep):
            fn, bufs, work, threads, index_checks = st.fn, st.bufs, st.work, st.threads, st.checks
            if threads > 1 or index_checks is not None:  # (the Python entry raises)
                return None
            keep.append(fn)
            launches.append(Launch(ctypes.cast(fn, ctypes.c_void_p).value, tuple(bufs), work))
        else:
            return None
    name = f"lowering_entry_{next(_entry_ids)}"
    flag_ints = list(range(FLAG_VALUES))  # kept alive: the entry embeds their addresses
    keep += [errors.check, flag_ints]
    spec = EntrySpec(name, n, tuple(checks), tuple(bindings), tuple(allocs), tuple(launches),
                     tuple(s for s, _ in outs), as_tuple, id(fast), id(errors.check),
                     tuple(id(i) for i in flag_ints))
    text = entry_ir(spec, native.abi())
    owner = native.NativeEntry(name, fast, keep, text, spec)
    return owner.builtin(native.jit_entry(text, name))
