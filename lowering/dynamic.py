"""Compiling for many sizes: which dims are symbolic, and the check that a
program compiled with size symbols serves every size its guards admit.

Which dims: `compile(dynamic=True)` makes every dim of every array argument
symbolic but those of size 0 or 1 (specialized, as torch does: broadcasting
and squeezing depend on them); `dynamic=None` (the default) compiles with
exact sizes first and, when a call's sizes differ from an entry's, compiles
again with the dims that changed symbolic (automatic dynamic); `False`
never. `mark_dynamic(x, dim)` / `mark_static(x, dim)` say it per array.
Symbols are given to array arguments that are C- or F-contiguous (their
strides follow from their sizes); arrays read from Python state keep their
sizes.

The check (`probe_sizes`, `differences`): the compiler records every
decision it takes on a symbolic size as a relation (`dialects.symbols`),
but what C code does with an int (numpy on a shape, `range`) it cannot see.
So a function traced with symbols is traced and compiled twice more (near its sizes, then far),
with other sizes that satisfy the recorded relations (the probe; nothing
runs), and the two must agree: the same captured graph, relations, plan and
kernels, where every number is the same expression or the same constant. A
size that escaped its symbol is a number that differs between the two; a
symbol compiled into a kernel is refused outright. Where they agree the
entry's guards are the relations; otherwise the entry keeps the exact sizes
it was compiled for (and the log says why)."""

from __future__ import annotations

import re
import weakref
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np
from xdsl.ir import Attribute, Operation

from dialects.symbols import ShapeEnv, SymDim, SymSize, SymStr, evaluate, symbols_of

# id(array) -> (weak reference, dims marked dynamic, dims marked static)
_MARKS: dict[int, tuple[Any, set[int], set[int]]] = {}


def _marks(x: np.ndarray, create: bool = False):
    m = _MARKS.get(id(x))
    if m is not None and m[0]() is x:
        return m
    if not create:
        return None
    key = id(x)
    m = (weakref.ref(x, lambda _r, key=key: _MARKS.pop(key, None)), set(), set())
    _MARKS[key] = m
    return m


def _dim(x, dim, what: str) -> int:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{what}: x must be a numpy array, got {type(x).__name__}")
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{what}: dim must be an int, got {type(dim).__name__}")
    if not -x.ndim <= dim < x.ndim:
        raise ValueError(f"{what}: dim {dim} is out of range for an array of {x.ndim} dims")
    return int(dim) % x.ndim


def mark_dynamic(x: np.ndarray, dim) -> None:
    """Compile functions called with x with dim `dim` of x symbolic (one
    program for every size of it), whatever their `dynamic=`; a list of dims
    marks each. A size of 0 or 1 at compile time stays specialized."""
    for d in (dim if isinstance(dim, (list, tuple)) else [dim]):
        d = _dim(x, d, "mark_dynamic")
        m = _marks(x, create=True)
        m[1].add(d)
        m[2].discard(d)


def mark_static(x: np.ndarray, dim) -> None:
    """Compile functions called with x for the exact size of its dim `dim`,
    even with `dynamic=True`."""
    for d in (dim if isinstance(dim, (list, tuple)) else [dim]):
        d = _dim(x, d, "mark_static")
        m = _marks(x, create=True)
        m[2].add(d)
        m[1].discard(d)


def symbolic_dims(dynamic, leaves: list, auto: dict[int, set[int]]) -> dict[int, tuple[bool, ...]]:
    """Per array leaf, which of its dims get a size symbol (see the module's
    docstring); leaves with none are left out."""
    if dynamic is False:
        return {}
    out: dict[int, tuple[bool, ...]] = {}
    seen: set[int] = set()
    for i, x in enumerate(leaves):
        if type(x) is not np.ndarray or x.ndim == 0 or id(x) in seen:
            continue  # (an array passed twice has the symbols of its first place)
        seen.add(id(x))
        if not (x.flags.c_contiguous or x.flags.f_contiguous):
            continue
        m = _marks(x)
        marked, static = (m[1], m[2]) if m is not None else ((), ())
        want = tuple((dynamic is True or d in auto.get(i, ()) or d in marked)
                     and d not in static and x.shape[d] >= 2 for d in range(x.ndim))
        if any(want):
            out[i] = want
    return out


def symbolic_shapes(env: ShapeEnv, leaves: list, dims: dict[int, tuple[bool, ...]]) -> dict[int, tuple]:
    """Each chosen leaf's shape with a new symbol for each chosen dim."""
    return {i: tuple(env.symbol(n) if want else n for n, want in zip(leaves[i].shape, dims[i]))
            for i in sorted(dims)}


_SYMBOL = re.compile(r"\bs\d+\b")


def probe_sizes(env: ShapeEnv, far: bool = False) -> dict[str, int] | None:
    """Other sizes for the symbols, satisfying every relation recorded (a
    symbol equal to another takes its size, one equal to a constant keeps
    it), each different from its hint — a few above it, or (`far`) about
    twice it, or small; None where no candidate tried does."""
    parent = {s: s for s in env.hints}

    def find(s):
        while parent[s] != s:
            s = parent[s]
        return s

    pinned: dict[str, int] = {}
    for rel in env.relations:
        m = re.fullmatch(r"(s\d+) == (s\d+)", rel)
        if m:
            parent[find(m.group(1))] = find(m.group(2))
            continue
        m = re.fullmatch(r"(s\d+) == (-?\d+)", rel)
        if m:
            pinned[m.group(1)] = int(m.group(2))
        elif " == " in rel:  # another equality: its symbols keep their sizes
            for sym in _SYMBOL.findall(rel):
                pinned[sym] = env.hints[sym]
    groups: dict[str, list[str]] = {}
    for s in env.hints:
        groups.setdefault(find(s), []).append(s)
    fixed = {find(s) for s in pinned}
    while True:
        failed: set[str] = set()
        for base in ((-1, -2, -3, -4) if far else (1, 2, 3, 8, 16, 64, 256)):
            values: dict[str, int] = {}
            for g, (root, members) in enumerate(sorted(groups.items())):
                h = env.hints[members[0]]
                if root in fixed:
                    v = h
                elif base > 0:
                    v = h + base * (g + 1)  # a few above
                elif base == -1:
                    v = 2 * h + 3 + 2 * g  # about twice, odd
                elif base == -2:
                    v = 2 * h + 2 + 2 * g  # about twice, even
                elif base == -3:
                    v = 2 + g  # small
                else:
                    v = max(2, h // 2) + g  # about half
                for s in members:
                    values[s] = v
            if values == env.hints:
                return None  # every size is pinned: nothing varies
            try:
                bad = [rel for rel in env.relations if not evaluate(rel, values)]
            except Exception:
                return None
            if not bad:
                return values
            failed.update(find(sym) for rel in bad for sym in _SYMBOL.findall(rel))
        # a relation no offset satisfies (`s1 <= 2`): its symbols keep their sizes
        if failed <= fixed:
            return None
        fixed |= failed


def fake_leaves(leaves: list, shapes: dict[int, tuple], values: dict[str, int]) -> list:
    """The call's leaves with each symbolic array replaced by zeros of the
    probe's sizes (same dtype and layout)."""
    out = list(leaves)
    made: dict[int, np.ndarray] = {}
    for i, shape in shapes.items():
        x = leaves[i]
        new = tuple(values[d.expr] if isinstance(d, SymDim) else d for d in shape)
        a = np.zeros(new, x.dtype, order="C" if x.flags.c_contiguous else "F")
        if not x.flags.writeable:
            a.flags.writeable = False
        made[id(x)] = a
    for i, x in enumerate(leaves):  # (an array passed twice: the same stand-in)
        if id(x) in made:
            out[i] = made[id(x)]
    return out


def differences(a, b, symbols: bool = True, path: str = "") -> str | None:
    """Where a (traced with the call's sizes) and b (with the probe's)
    differ, or None: a symbolic size or constant must be the same
    expression in both, any other value equal (`symbols` False: none may be
    symbolic at all — a value returned or written to Python state)."""
    if isinstance(a, SymSize) or isinstance(b, SymSize):
        a, b = getattr(a, "sym", a), getattr(b, "sym", b)
        if not symbols:
            return f"{path}: a size reaches the caller as a value"
    if isinstance(a, (SymDim, SymStr)) or isinstance(b, (SymDim, SymStr)):
        if not symbols:
            return f"{path}: a size reaches the caller as a value"
        if type(a) is not type(b) or a.expr != b.expr:
            return f"{path}: {a.expr if hasattr(a, 'expr') else a} vs "\
                   f"{b.expr if hasattr(b, 'expr') else b}"
        return None
    if isinstance(a, (set, frozenset)) and type(a) is type(b):
        if symbols_of(list(a)) or symbols_of(list(b)) or any(isinstance(e, SymSize) for e in a):
            return f"{path}: a size reaches the caller as a value"
        return None if a == b else f"{path}: sets differ"
    if type(a) is slice and type(b) is slice:
        return differences((a.start, a.stop, a.step), (b.start, b.stop, b.step), symbols, path)
    if isinstance(a, (bool, int, float, str, bytes, type(None), np.generic, np.dtype, type)):
        if type(a) is not type(b) or not (a == b or (a != a and b != b)):
            return f"{path}: {a!r} vs {b!r}"
        return None
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, (tuple, list)):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} items"
        for k, (x, y) in enumerate(zip(a, b)):
            d = differences(x, y, symbols, f"{path}[{k}]")
            if d:
                return d
        return None
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{path}: keys differ"
        for k in a:
            d = differences(a[k], b[k], symbols, f"{path}[{k!r}]")
            if d:
                return d
        return None
    if isinstance(a, np.ndarray):
        if a.shape != b.shape or a.dtype != b.dtype or not np.array_equal(a, b, equal_nan=True):
            return f"{path}: arrays differ"
        return None
    if isinstance(a, Operation):
        return _op_differences(a, b, symbols, path, {}, {})
    if isinstance(a, Attribute):
        sa, sb = getattr(a, "_symbolic", None), getattr(b, "_symbolic", None)
        if sa is not None or sb is not None:
            return differences(sa if sa is not None else a, sb if sb is not None else b,
                               symbols, path)
        params = getattr(a, "parameters", None)
        if isinstance(params, tuple):
            return differences(params, b.parameters, symbols, path)
        if hasattr(a, "data"):
            return differences(a.data, b.data, symbols, path)
        return None if a == b else f"{path}: {a} vs {b}"
    if is_dataclass(a):
        for f in fields(a):
            d = differences(getattr(a, f.name), getattr(b, f.name), symbols, f"{path}.{f.name}")
            if d:
                return d
        return None
    if a is b:
        return None
    try:
        return None if a == b else f"{path}: {type(a).__name__} values differ"
    except Exception:
        return f"{path}: {type(a).__name__} cannot be compared"


def _op_differences(a: Operation, b: Operation, symbols: bool, path: str,
                    ia: dict, ib: dict) -> str | None:
    """Two ops (and their regions) the same up to SSA names."""
    where = f"{path}/{a.name}"
    if a.name != b.name or len(a.operands) != len(b.operands) or len(a.regions) != len(b.regions):
        return f"{where}: {a.name} vs {b.name}"
    for x, y in zip(a.operands, b.operands):
        if ia.get(x) != ib.get(y):
            return f"{where}: operands differ"
    for name in (*a.properties, *b.properties):
        d = differences(a.properties.get(name), b.properties.get(name), symbols, f"{where}.{name}")
        if d:
            return d
    for name in (*a.attributes, *b.attributes):
        d = differences(a.attributes.get(name), b.attributes.get(name), symbols, f"{where}.{name}")
        if d:
            return d
    if len(a.results) != len(b.results):
        return f"{where}: result counts differ"
    for x, y in zip(a.results, b.results):
        d = differences(x.type, y.type, symbols, f"{where}:type")
        if d:
            return d
        ia[x] = ib[y] = len(ia)
    for ra, rb in zip(a.regions, b.regions):
        if len(ra.blocks) != len(rb.blocks):
            return f"{where}: blocks differ"
        for ba, bb in zip(ra.blocks, rb.blocks):
            if len(ba.args) != len(bb.args):
                return f"{where}: block arguments differ"
            for x, y in zip(ba.args, bb.args):
                d = differences(x.type, y.type, symbols, f"{where}:arg")
                if d:
                    return d
                ia[x] = ib[y] = len(ia)
            oa, ob = list(ba.ops), list(bb.ops)
            if len(oa) != len(ob):
                return f"{where}: {len(oa)} vs {len(ob)} ops"
            for x, y in zip(oa, ob):
                d = _op_differences(x, y, symbols, where, ia, ib)
                if d:
                    return d
    return None


def plain_sizes(obj):
    """obj with every symbolic size replaced by its value (a size returned
    or written to Python state reaches the caller as the int it is)."""
    if isinstance(obj, SymSize):
        return int.__int__(obj.sym)
    if isinstance(obj, SymDim):
        return int.__int__(obj)
    if isinstance(obj, SymStr):
        return str.__str__(obj)
    if type(obj) in (tuple, list, set, frozenset):
        new = [plain_sizes(e) for e in obj]
        return obj if all(x is y for x, y in zip(new, obj)) else type(obj)(new)
    if type(obj) is slice:
        return slice(plain_sizes(obj.start), plain_sizes(obj.stop), plain_sizes(obj.step))
    if type(obj) is dict:
        return {k: plain_sizes(v) for k, v in obj.items()}
    if is_dataclass(obj) and not isinstance(obj, type) and not isinstance(obj, Attribute):
        for f in fields(obj):
            v = getattr(obj, f.name)
            w = plain_sizes(v)
            if w is not v:
                try:
                    object.__setattr__(obj, f.name, w)
                except Exception:
                    pass
        return obj
    return obj
