"""Calls of a `backend="gpu"` function on device arrays (torch CUDA tensors,
CuPy arrays, `__cuda_array_interface__` producers): results come back as
arrays of the same kind, on the device, and arguments written in place are
written on the device.

A device call is served by a device entry, keyed by what the call's
arguments are made of: each device array's kind, shape, dtype and strides;
each other argument's type and value (None, bool, int, float, str). A miss
runs the call as any call runs, on host copies of the device arrays (it
traces and compiles where no entry serves them), copies back to the device
every argument it wrote and the results; where the entry that served it is
one graph that writes no Python state, reads no array of it, draws no
random numbers and returns its results as they are (`Entry.device`), later
calls with the same key check the entry's guards on the Python state it
reads (a helper function, a constant), then run its program on the device
arrays directly, with no copy.
Anything else keeps running on host copies — correct, and slow: the log
`graph_breaks` says why once per key (a graph break, Python state, random
numbers, a result that is a view, host arrays mixed with device arrays).
With mode="reduce-overhead" each device entry replays its program as one
graph (lowering/device_graph.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime import gpu
from runtime.guards import layout_class

from . import device_random, pytree
from .capture.tracer import apply_plan
from .config import logger
from .device_graph import GraphedEntry
from .fastpath import MISS

_SCALARS = (type(None), bool, int, float, str)
_GENERATORS = (np.random.Generator, np.random.RandomState)


def device_of(leaves) -> tuple[gpu.Device | None, list[int]]:
    """The device of the call's device arrays (None: there are none) and
    their positions among the leaves; arrays of two kinds are an error."""
    dev, where = None, []
    for i, x in enumerate(leaves):
        d = gpu.of(x)
        if d is None:
            continue
        if dev is not None and d is not dev:
            raise TypeError(f"argument leaf {i} is a {d.name} array and another is a "
                            f"{dev.name} array: one call takes arrays of one kind")
        dev = d
        where.append(i)
    return dev, where


def _key(treedef, leaves, dev) -> tuple | None:
    parts: list[Any] = [treedef]
    for x in leaves:
        if type(x) is float:  # by its bits: -0.0 == 0.0 and NaN != NaN as floats
            parts.append((float, x.hex()))
        elif isinstance(x, _SCALARS):
            parts.append((type(x), x))
        elif dev.owns(x):
            parts.append(("D", tuple(x.shape), str(x.dtype), _strides(x),
                          str(getattr(x, "device", ""))))
        elif isinstance(x, _GENERATORS):  # (its draws are made on the device)
            parts.append(("rng", type(x)))
        else:
            return None  # host arrays or objects beside device arrays: no device entry
    if overlapping(dev, leaves):
        return None  # (arguments sharing memory: the host copies' path, every call)
    return tuple(parts)


def _span(dev, x) -> tuple[int, int] | None:
    """The bytes [lo, hi) a device array's elements occupy (None: empty)."""
    shape = tuple(x.shape)
    if 0 in shape:
        return None
    if callable(getattr(x, "stride", None)):  # torch: strides in elements
        item = x.element_size()
        st = [int(v) * item for v in x.stride()]
    else:
        item = x.itemsize
        st = [int(v) for v in x.strides]
    ptr = dev.data_ptr(x)
    lo = ptr + sum((n - 1) * v for n, v in zip(shape, st) if v < 0)
    hi = ptr + sum((n - 1) * v for n, v in zip(shape, st) if v > 0) + item
    return lo, hi


def overlapping(dev, leaves) -> list[tuple[int, int]]:
    """Pairs of device-array leaves whose memory may overlap (the same array
    passed twice, two views of one): a program compiled for separate arrays
    must not run on them (a write through one would be read through the
    other), and their host copies must keep the sharing."""
    spans = []
    for i, x in enumerate(leaves):
        if type(x) not in (float, int, bool) and not isinstance(x, _SCALARS) and dev.owns(x):
            sp = _span(dev, x)
            if sp is not None:
                spans.append((i, sp))
    if len(spans) < 2:
        return []
    return [(i, j) for k, (i, a) in enumerate(spans) for j, b in spans[k + 1:]
            if a[0] < b[1] and b[0] < a[1]]


def fast_call(cf, args: tuple, run, dev) -> Callable:
    """`cf._device_last`: the call of `run` (the device entry this call of
    positional device arrays took) for a later call whose arrays have the
    same kinds, shapes, dtypes, strides and devices (no flattening, no key),
    MISS otherwise — one generated function, each argument's checks
    straight-line (a loop over signatures cost ~0.3 us of W6's call): a torch
    tensor's shape, dtype, strides and device read one by one, to the first
    that differs; another array's through its signature function. A replay
    that needs nothing else goes through the entry's `hot`."""
    writes = getattr(run, "writes", True)
    ns: dict = {"MISS": MISS, "run": run, "dev": dev, "stats": cf.stats,
                "overlapping": overlapping}
    n = len(args)
    lines = ["def fast(args):", f"    if len(args) != {n}:", "        return MISS"]
    if n:
        lines.append(f"    {', '.join(f'a{i}' for i in range(n))}, = args")
    for i, x in enumerate(args):
        t, f, sig = signature(x)
        ns[f"t{i}"] = t
        lines += [f"    if type(a{i}) is not t{i}:", "        return MISS"]
        if f is _tensor_signature:
            for k, read in enumerate(("shape", "dtype", "stride()", "device")):
                ns[f"s{i}_{k}"] = sig[k]
                lines += [f"    if a{i}.{read} != s{i}_{k}:", "        return MISS"]
        else:
            ns[f"f{i}"], ns[f"s{i}"] = f, sig
            lines += [f"    if f{i}(a{i}) != s{i}:", "        return MISS"]
    if writes and n > 1:  # (read-only: may alias)
        lines += ["    if overlapping(dev, args):", "        return MISS"]
    if hasattr(run, "hot"):  # (a graphed entry: armed, or disarmed, as it captures)
        lines += ["    hot = run.hot", "    try:",
                  "        r = hot(args) if hot is not None else MISS",
                  "        if r is MISS:",
                  "            r = run(list(args), (args, {}))"]
    else:
        lines += ["    try:", "        r = run(list(args), (args, {}))"]
    lines += ["    except IndexError:  # a gather's index out of range: the general path raises",
              "        return MISS",
              "    if r is not MISS:",
              "        stats['cache_hits'] += 1",
              "    return r"]
    exec("\n".join(lines), ns)  # noqa: S102 (our own text, from the call's signature)
    return ns["fast"]


def signature(x) -> tuple:
    """What `fast` compares per argument: its type, the function that reads
    the rest of its signature (shape, dtype, strides, device), and that."""
    f = _SIGNATURES.get(type(x))
    if f is None:
        torch = type(x).__module__.startswith("torch")
        f = _SIGNATURES[type(x)] = _tensor_signature if torch else _any_signature
    return type(x), f, f(x)


def _any_signature(x) -> tuple:
    # (the device: a torch CPU tensor has the type of a CUDA one, and GPUs differ)
    return (tuple(x.shape), x.dtype, _strides(x), str(getattr(x, "device", "")))


def _tensor_signature(x) -> tuple:
    # a torch tensor's: the same, read in fewer, cheaper calls (a torch.Size
    # and a torch.device compare by value)
    return (x.shape, x.dtype, x.stride(), x.device)


_SIGNATURES: dict[type, Callable] = {}


def _strides(x) -> tuple[int, ...]:
    stride = getattr(x, "stride", None)
    s = stride() if callable(stride) else x.strides
    return s if type(s) is tuple else tuple(int(v) for v in s)


def call(cf, args, kwargs, leaves, treedef, dev, where):
    """The compiled function `cf` called with device arrays of `dev` among
    `leaves` (at `where`: `device_of`)."""
    entries = cf.__dict__.setdefault("_device_entries", {})
    key = _key(treedef, leaves, dev)
    run = entries.get(key) if key is not None else None
    r = MISS
    if run is not None:
        try:
            r = run(leaves, (args, kwargs))
        except IndexError:  # a gather's index out of range: the host copies' call raises
            r = MISS
        if r is not MISS:
            cf.stats["cache_hits"] += 1
            if not kwargs and len(where) == len(leaves) == len(args):
                # positional device arrays only: the next call may take `fast`
                cf._device_last = fast_call(cf, args, run, dev)
            return r
    # this call, once: on host copies (compiles on a miss)
    if not dev.interpreted and not cf.entries:
        from .backends.triton_launch import warm_up  # (Triton's first-use work, alongside)

        warm_up()
    out, before = on_host_copies(cf.__qualname__, dev, leaves, where, treedef,
                                 lambda hargs, hkwargs, host: cf(*hargs, **hkwargs))
    if key is not None:
        # the entry that serves these arguments (found by their values before the call)
        unchanged = [before.get(i, x) for i, x in enumerate(leaves)]
        entry = _entry_of(cf, unchanged, treedef)
        why = _why_not(cf, entry)
        if why is None:
            entries[key] = _device_runner(dev, entry, cf)
        else:
            logger("graph_breaks").info("%s on %s arrays runs on host copies: %s",
                                        cf.__qualname__, dev.name, why)
    return _to_device(dev, out)


def on_host_copies(name: str, dev, leaves, where, treedef, run):
    """`run(args, kwargs, leaves)` on host copies of the device arrays of
    `dev` among `leaves` (at `where`), each copy in its array's layout class
    (so the program compiled on them is the one a device entry runs on the
    device arrays); the arguments it wrote go back to the caller's device
    arrays, also when it raises (numpy's writes before an error stay in
    numpy's arrays). Returns run's result and, per device leaf, its host
    copy as it was before the call."""
    layouts = {i: gpu.layout_class_of(leaves[i]) for i in where}
    host = [_in_layout(dev.to_host(x), layouts[i]) if i in where else x
            for i, x in enumerate(leaves)]
    for i, j in overlapping(dev, leaves):
        if leaves[i] is not leaves[j]:
            raise ValueError(
                f"lowering: arguments {i} and {j} of {name} are device arrays that "
                "share memory (two views of one array); pass separate arrays, or the same "
                "array object twice")
        host[j] = host[i]  # (one array passed twice: numpy sees one array twice)
    before = {i: _in_layout(np.array(host[i], copy=True), layouts[i]) for i in where}
    hargs, hkwargs = pytree.unflatten(treedef, host)
    try:
        out = run(hargs, hkwargs, host)
    finally:
        for i, old in before.items():
            if not _same(host[i], old):
                _write(dev, leaves[i], host[i])
    return out, before


def _in_layout(h: np.ndarray, layout: str) -> np.ndarray:
    """Host array `h`, or a copy of it in layout class `layout` (a device
    to_host copy comes back C-contiguous from a strided view, and from
    CuPy also from an F-ordered array). A strided copy is a view of twice
    the memory, every stride doubled."""
    if layout_class(h) == layout:
        return h
    if layout == "C":
        return np.ascontiguousarray(h)
    if layout == "F":
        return np.asfortranarray(h)
    dense = np.ascontiguousarray(h)
    out = np.lib.stride_tricks.as_strided(np.empty(2 * h.size, h.dtype), h.shape,
                                          tuple(2 * s for s in dense.strides))
    out[...] = dense
    return out


_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether a and b (one shape, one dtype) hold the same bits: compared
    as unsigned integers of the item's size in place (NaN payloads and
    signed zeros told apart; no copies of the arrays' bytes)."""
    bits = _BITS.get(a.dtype.itemsize)
    if bits is None or a.dtype.hasobject or a.shape != b.shape:
        return a.tobytes() == b.tobytes()
    return bool(np.array_equal(a.view(bits), b.view(bits)))


def _entry_of(cf, host, treedef):
    tree = pytree.unflatten(treedef, host)
    for e in reversed(cf.entries):
        g = e.gvals(host, tree)
        if g is not None and e.guards(treedef, host, g):
            return e
    return None


def _why_not(cf, entry) -> str | None:
    if cf._failed is not None:
        return f"its compile failed ({cf._failed})"
    if entry is None:
        return "no compiled entry serves these arguments (an eager fallback)"
    if getattr(entry, "device", None) is None:
        return entry.__dict__.get("device_why", "the entry is not one plain graph")
    prog = entry.device[0]
    if getattr(prog, "checks_indices", False) and prog.inputs_written:
        # (on the caller's arrays, a write would land before the check fails)
        return "it writes its arguments and checks its gathers' indices after the run"
    return None


def _device_runner(dev, entry, cf=None):
    """The device entry's call: the entry's guards on the Python state the
    function reads (a helper function, a constant: its `G` checks), then
    its program on the caller's arrays; MISS where a guard fails. For a
    mode="reduce-overhead" function, the program replayed as a graph
    (lowering/device_graph.py), which runs `steps` where it cannot."""
    prog, bindings, out_plan, convert, owners = entry.device
    state = [c for c in entry.guards.checks if c.where == "G"]
    scalars = [(i, c) for i, c in enumerate(convert) if c is not None and type(bindings[i]) is int]
    draws = device_random.draws_of(prog, bindings)

    def steps(leaves, tree):
        inputs = [leaves[b] if type(b) is int else None for b in bindings]
        for i, c in scalars:  # a Python scalar: a 0-d device array of its value
            inputs[i] = dev.from_host(np.asarray(c(inputs[i])))
        if not draws:
            results = prog.run_device(inputs, dev)
        else:  # (the generators as they were where the call does not complete here)
            states = device_random.generator_states([d for _, d in draws], leaves)
            try:
                for i, d in draws:
                    inputs[i] = d.make(dev, leaves)
                results = prog.run_device(inputs, dev)
            except BaseException:
                device_random.restore(states)
                raise
        results = fresh_on_device(dev, results, inputs, owners, prog.device_fresh)
        return apply_plan(out_plan, results, leaves)

    if cf is not None and cf.mode == "reduce-overhead":
        run = GraphedEntry(dev, entry, steps, cf.__qualname__)
    else:
        def run(leaves, tree):
            if state:
                g = entry.gvals(leaves, tree)
                if g is None or any(c.failure(leaves, g) for c in state):
                    return MISS
            return steps(leaves, tree)
    # (arguments sharing memory matter only to a call that writes one: in
    # place, or through the plan's write-backs)
    run.writes = bool(getattr(prog, "inputs_written", True)) or bool(out_plan.writebacks)
    return run


def fresh_on_device(dev, results, inputs: list, owners: list, fresh) -> list:
    """numpy's results are new arrays: a program's output that is one of its
    input buffers (`x.copy()` of an argument lowers to no kernel at all) or
    the same buffer as another output is copied on the device, unless it is
    the argument itself, unchanged or written in place (`owners`: `x += 1;
    return x` returns the caller's array). `fresh[i]`: output i is a buffer
    the program allocated for it alone."""
    seen: set[int] = set()
    out = []
    for i, r in enumerate(results):
        owner = owners[i] if i < len(owners) else None
        keep = (owner is not None and r is inputs[owner]) or (fresh is not None and fresh[i])
        if not keep or id(r) in seen:
            r = dev.copy(r)
        seen.add(id(r))
        out.append(r)
    return out


def _write(dev, target, host: np.ndarray) -> None:
    new = dev.from_host(host)
    if hasattr(target, "copy_"):
        target.copy_(new)
    else:
        target[...] = new


def _to_device(dev, out):
    leaves, tdef = pytree.flatten(out)
    leaves = [dev.from_host(x) if isinstance(x, np.ndarray) else x for x in leaves]
    return pytree.unflatten(tdef, leaves)
