"""Python state the function reaches besides its array arguments, Dynamo's way.

Before a trace, `walk` visits what the function can read: the objects among
its arguments (`self`, a config, a generator), the globals and closure cells
named by its code (and by the functions and methods it reaches), and what
those hold — instance attributes, dict and list items, module attributes —
recording each value under a `Path` that can be evaluated again on a later
call (`L['self'].W`, `G['P']['b']`). Arrays found there are graph inputs read
through their path on every call, never constants; scalars, the lengths of
containers and the types of objects on those paths are guarded.

Writes are found by comparing each container with its snapshot after the
trace (`diff`): an attribute or item set, a deletion, an `append`/`extend`, a
rebound global. They are undone (`restore`) and then replayed on every call
with the compiled program's results (`replay`), so the user's objects hold
ndarrays exactly as eager numpy leaves them, and a traced value never stays
in them."""

from __future__ import annotations

import copy
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtime.guards import path_source

_SCALARS = (bool, int, float, complex, str, bytes, type(None))
_MISSING = object()
GENERATORS = (np.random.Generator, np.random.RandomState)

MAX_DEPTH = 6
MAX_ITEMS = 256  # items of one container that are walked
MAX_SLOTS = 4096

_SKIP_MODULES = ("numpy", "lowering", "dialects", "passes", "runtime", "xdsl", "builtins",
                 "functools", "typing", "abc", "collections", "math", "operator")


@dataclass(frozen=True)
class Path:
    """Where a value lives: a root (an argument leaf "L", the (args, kwargs)
    tuple "R", a globals dict "G", a closure cell "C", a fixed object "O")
    then attribute ("a"), class attribute ("c") and item ("i") steps."""

    root: str
    ref: Any  # the leaf index, or the dict / cell / object itself
    steps: tuple = ()
    label: str = ""

    def child(self, kind: str, key: Any, label: str) -> "Path":
        return Path(self.root, self.ref, self.steps + ((kind, key),), label)

    def get(self, leaves: list, tree: Any) -> Any:
        if self.root == "L":
            x = leaves[self.ref]
        elif self.root == "R":
            x = tree
        elif self.root == "C":
            x = self.ref.cell_contents
        else:  # "G" and "O": the dict / object itself
            x = self.ref
        for kind, key in self.steps:
            if kind == "a":
                x = x.__dict__[key]
            elif kind == "c":
                x = getattr(type(x), key)
            else:
                x = x[key]
        return x

    def expr(self, ns: dict) -> str:
        """Python source evaluating this path from `L` (leaves) and `R` (tree);
        objects it needs are bound in `ns`."""
        if self.root == "L":
            return path_source("L", (("i", self.ref),) + self.steps, ns)
        if self.root == "R":
            return path_source("R", self.steps, ns)
        name = f"_root{id(self.ref)}"
        ns[name] = self.ref
        return path_source(f"{name}.cell_contents" if self.root == "C" else name, self.steps, ns)


@dataclass
class Slot:
    path: Path
    value: Any
    kind: str  # "array" | "generator" | "scalar" | "callable" | "dict" | "list" | "tuple" | "object" | "globals" | "module"
    parent: int | None  # the slot of the container it was found in
    snapshot: Any = None  # containers: their contents before the trace
    baseline: Any = None  # ... and once the stand-ins are in (what writes are found against)


@dataclass
class State:
    slots: list[Slot] = field(default_factory=list)
    truncated: bool = False
    cells: list = field(default_factory=list)  # (closure cell, original content) swapped


def _contents(s: Slot):
    v = s.value
    if s.kind == "dict":
        return dict(v)
    if s.kind == "list":
        return list(v)
    if s.kind == "object":
        return dict(vars(v))
    d = v if s.kind == "globals" else vars(v)
    return {k: d.get(k, _MISSING) for k in s.snapshot}


def swap_in(state: State, stand_in) -> None:
    """For the trace, put each array's and generator's stand-in (`stand_in(i,
    slot)`: its TracedArray or traced generator, or None) where it lives, so
    whatever the function computes from it is traced; tuples holding one are
    rebuilt in their parent. `restore` puts the originals back."""
    new: dict[int, Any] = {}
    for i, s in enumerate(state.slots):
        if s.kind in ("array", "generator"):
            r = stand_in(i, s)
            if r is not None:
                new[i] = r
    for i in sorted(new, reverse=True):  # children were found after their parents
        _put(state, i, new)
    for s in state.slots:
        if s.kind == "globals" and s.snapshot.get("type", None) is _MISSING:
            # `type(x) is np.ndarray` in the function's module sees what
            # eager numpy would: the stand-ins' types are the real ones
            s.value["type"] = traced_type
        if s.snapshot is not None:
            s.baseline = _contents(s)


class _TypeMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, type)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, type)

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs:
            x = args[0]
            t = type(x)
            return x.__class__ if getattr(t, "_stands_in", False) else t
        return type(*args, **kwargs)


class traced_type(metaclass=_TypeMeta):
    """`type` as the traced function's globals see it while it is traced:
    `type(x)` of a stand-in is the type it stands for; anything else is
    `builtins.type` (isinstance checks against it hold as for `type`)."""


def _put(state: State, i: int, new: dict) -> None:
    """Slot i's stand-in `new[i]` goes where the slot's value is; a tuple
    holding it is rebuilt, and goes where that tuple is, and so on up."""
    while True:
        s = state.slots[i]
        p = s.parent
        if p is None:
            if s.path.root == "C" and not s.path.steps:
                state.cells.append((s.path.ref, s.value))
                s.path.ref.cell_contents = new[i]
            return
        ps = state.slots[p]
        kind, key = s.path.steps[-1]
        if ps.kind != "tuple":
            if ps.kind in ("dict", "list", "globals"):
                ps.value[key] = new[i]
            elif ps.kind in ("object", "module") and kind == "a":
                vars(ps.value)[key] = new[i]
            return
        items = list(new.get(p, ps.value))
        items[key] = new[i]
        new[p] = type(ps.value)(items)
        i = p


def _user_module(name: str) -> bool:
    return not (name or "").split(".")[0] in _SKIP_MODULES and name not in sys.stdlib_module_names


def _is_user_object(v: Any) -> bool:
    t = type(v)
    if not hasattr(v, "__dict__") or isinstance(v, (type, types.ModuleType, types.FunctionType,
                                                     types.MethodType, types.BuiltinFunctionType)):
        return False
    return _user_module(getattr(t, "__module__", "") or "") or t is types.SimpleNamespace


# builtins through which code reads globals by a name given as a string
_GLOBALS_BY_STRING = frozenset({"globals", "vars", "eval", "exec", "__import__"})


def code_names(fns: list) -> tuple[set[str], list, set[str]]:
    """Names the code of `fns` (and of the functions they reach through
    globals, closures and the methods of classes) can read. Returns (names,
    [(function, depth)] reached, global names): names are attribute and
    global names and the identifiers among string constants (`getattr(obj,
    "alpha")`); global names leave out those strings (`d["a"]` reads no
    global `a`) unless the code reads globals by name (`globals()["a"]`)."""
    names: set[str] = set()
    strings: set[str] = set()
    seen: set[int] = set()
    out = []
    stack = [(f, 3) for f in fns]
    while stack:
        f, d = stack.pop()
        f = getattr(f, "__wrapped__", f) if not isinstance(f, types.FunctionType) else f
        if isinstance(f, types.MethodType):
            f = f.__func__
        if isinstance(f, (staticmethod, classmethod)):
            f = f.__func__
        if isinstance(f, property):
            stack.extend((g, d) for g in (f.fget, f.fset) if g is not None)
            continue
        if not isinstance(f, types.FunctionType) or id(f) in seen or d < 0:
            continue
        if not _user_module(getattr(f, "__module__", "") or "") and not f.__module__ == "lowering.examples":
            continue
        seen.add(id(f))
        out.append((f, d))
        codes = [f.__code__]
        while codes:
            c = codes.pop()
            names.update(c.co_names)
            names.update(c.co_freevars)
            # names given as strings (`getattr(obj, "alpha")`)
            strings.update(k for k in c.co_consts if type(k) is str and k.isidentifier())
            codes.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        g = f.__globals__
        for n in f.__code__.co_names:
            v = g.get(n)
            if isinstance(v, types.FunctionType):
                stack.append((v, d - 1))
        for cell in f.__closure__ or ():
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if isinstance(v, types.FunctionType):
                stack.append((v, d - 1))
    gnames = names | strings if names & _GLOBALS_BY_STRING else set(names)
    return names | strings, out, gnames


def _class_functions(t: type) -> list:
    out = []
    for k in t.__mro__:
        if k is object or not _user_module(getattr(k, "__module__", "") or ""):
            continue
        for v in vars(k).values():
            if isinstance(v, (types.FunctionType, property, staticmethod, classmethod)):
                out.append(v)
    return out


def walk(fn: Any, leaves: list, tree: Any, leaf_names: list[str]) -> State:
    """Everything the function can reach outside its array arguments."""
    fns, roots = _entry_points(fn)
    names, reached, global_names = code_names(fns)
    state = State()
    seen: dict[int, int] = {}  # container / object id -> slot
    queue: list[tuple[Path, Any, int, int | None, bool]] = []  # (path, value, depth, parent, named)
    for i, x in enumerate(leaves):
        if isinstance(x, GENERATORS) or _is_user_object(x):
            queue.append((Path("L", i, (), f"L[{leaf_names[i]!r}]"), x, 0, None, True))
    for path, x in roots:
        queue.append((path, x, 0, None, True))
    globals_seen: set[int] = set()
    for f, _ in reached:
        g = f.__globals__
        if id(g) not in globals_seen:
            globals_seen.add(id(g))
            gnames = sorted(global_names)  # unbound ones too: a later `global` binding is a write
            snap = {n: g.get(n, _MISSING) for n in gnames}
            state.slots.append(Slot(Path("G", g, (), "G"), g, "globals", None, snap))
            gslot = len(state.slots) - 1
            for n in gnames:
                if n in g:
                    queue.append((Path("G", g, (("i", n),), f"G[{n!r}]"), g[n], 1, gslot, True))
        for n, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            queue.append((Path("C", cell, (), f"<closure {n}>"), v, 1, None, True))
    head = 0
    classes: set[type] = set()
    while head < len(queue):
        path, v, depth, parent, named = queue[head]
        head += 1
        if len(state.slots) >= MAX_SLOTS:
            state.truncated = True
            break
        t = type(v)
        if isinstance(v, np.ndarray):
            state.slots.append(Slot(path, v, "array", parent))
            continue
        if isinstance(v, GENERATORS):
            state.slots.append(Slot(path, v, "generator", parent))
            continue
        if t in _SCALARS or isinstance(v, np.generic):
            if named:
                state.slots.append(Slot(path, v, "scalar", parent))
            continue
        if id(v) in seen:
            continue
        if depth >= MAX_DEPTH:
            state.truncated = True
            continue
        if t is dict or t is list or t is tuple:
            kind = t.__name__
            snap = dict(v) if t is dict else list(v) if t is list else None
            seen[id(v)] = len(state.slots)
            state.slots.append(Slot(path, v, kind, parent, snap))
            me = len(state.slots) - 1
            items = list(v.items()) if t is dict else list(enumerate(v))
            if len(items) > MAX_ITEMS:
                state.truncated = True
                items = items[:MAX_ITEMS]
            for k, e in items:
                queue.append((path.child("i", k, f"{path.label}[{k!r}]"), e, depth + 1, me, True))
            continue
        if isinstance(v, types.ModuleType):
            if not _user_module(v.__name__):
                continue
            d = vars(v)
            mnames = sorted(n for n in names if n in d and not n.startswith("__"))
            seen[id(v)] = len(state.slots)
            state.slots.append(Slot(path, v, "module", parent, {n: d[n] for n in mnames}))
            me = len(state.slots) - 1
            for n in mnames:
                queue.append((path.child("a", n, f"{path.label}.{n}"), d[n], depth + 1, me, True))
            continue
        if _is_user_object(v):
            seen[id(v)] = len(state.slots)
            d = vars(v)
            state.slots.append(Slot(path, v, "object", parent, dict(d)))
            me = len(state.slots) - 1
            if t not in classes:
                classes.add(t)
                more, _, _ = code_names(_class_functions(t))
                names |= more
            items = list(d.items())
            if len(items) > MAX_ITEMS:
                state.truncated = True
                items = items[:MAX_ITEMS]
            for k, e in items:
                queue.append((path.child("a", k, f"{path.label}.{k}"), e, depth + 1, me,
                              k in names))
            for k in sorted(names):
                if k in d or k.startswith("__"):
                    continue
                for base in t.__mro__:
                    if k in vars(base):
                        cv = vars(base)[k]
                        if type(cv) in _SCALARS or isinstance(cv, (np.ndarray, np.generic)):
                            queue.append((path.child("c", k, f"type({path.label}).{k}"), cv,
                                          depth + 1, me, True))
                        break
            continue
        if callable(v) and named and parent is not None:
            # a function or other callable held in state (`self.act = np.tanh`)
            state.slots.append(Slot(path, v, "callable", parent))
    return state


def _entry_points(fn: Any) -> tuple[list, list[tuple[Path, Any]]]:
    """The Python functions whose code runs, and objects bound into the
    callable (a bound method's self, a partial's arguments, a callable
    object), each with a path."""
    fns: list = []
    roots: list[tuple[Path, Any]] = []
    stack = [(fn, Path("O", fn, (), "fn"))]
    while stack:
        f, path = stack.pop()
        if isinstance(f, types.FunctionType):
            fns.append(f)
        elif isinstance(f, types.MethodType):
            fns.append(f.__func__)
            roots.append((Path("O", f.__self__, (), "self"), f.__self__))
        elif hasattr(f, "__wrapped__") and getattr(type(f), "__module__", "").startswith("lowering"):
            stack.append((f.__wrapped__, path))
        elif isinstance(f, __import__("functools").partial):
            stack.append((f.func, path))
            roots.append((Path("O", f.args, (), "partial.args"), f.args))
            roots.append((Path("O", f.keywords, (), "partial.keywords"), f.keywords))
        elif callable(f) and _is_user_object(f):
            fns.extend(_class_functions(type(f)))
            roots.append((path, f))
    return fns, roots


def diff(state: State) -> list[tuple]:
    """The writes the trace made to the walked containers, as records
    ("set", slot, key, new) / ("del", slot, key) / ("extend", slot, items) /
    ("replace", slot, items), in slot order."""
    writes: list[tuple] = []
    for i, s in enumerate(state.slots):
        if s.snapshot is None:
            continue
        v = s.value
        base = s.baseline if s.baseline is not None else s.snapshot
        if s.kind in ("dict", "object", "globals", "module"):
            now = v if s.kind in ("dict", "globals") else vars(v)
            keys = base.keys() if s.kind in ("globals", "module") else None
            if keys is not None:  # only the names the code uses
                for k in keys:
                    old, new = base[k], now.get(k, _MISSING)
                    if new is _MISSING and old is not _MISSING:
                        writes.append(("del", i, k))
                    elif new is not old:
                        writes.append(("set", i, k, new))
                continue
            for k, old in base.items():
                if k not in now:
                    writes.append(("del", i, k))
                elif now[k] is not old:
                    writes.append(("set", i, k, now[k]))
            for k in now:
                if k not in base:
                    writes.append(("set", i, k, now[k]))
        elif s.kind == "list":
            old, now = base, list(v)
            if len(now) >= len(old) and all(a is b for a, b in zip(old, now)):
                if len(now) > len(old):
                    writes.append(("extend", i, None, now[len(old):]))
            else:
                writes.append(("replace", i, None, now))
    return writes


def restore(state: State) -> None:
    """Put every walked container back as it was before the trace."""
    for cell, v in reversed(state.cells):
        cell.cell_contents = v
    state.cells.clear()
    for s in state.slots:
        if s.snapshot is None:
            continue
        v = s.value
        if s.kind == "dict":
            if v.keys() != s.snapshot.keys() or any(v[k] is not s.snapshot[k] for k in s.snapshot):
                v.clear()
                v.update(s.snapshot)
        elif s.kind == "list":
            if len(v) != len(s.snapshot) or any(a is not b for a, b in zip(v, s.snapshot)):
                v[:] = s.snapshot
        elif s.kind == "object":
            d = vars(v)
            if d.keys() != s.snapshot.keys() or any(d[k] is not s.snapshot[k] for k in d):
                for k in list(d):
                    if k not in s.snapshot:
                        del d[k]
                d.update(s.snapshot)
        elif s.kind in ("globals", "module"):
            d = v if s.kind == "globals" else vars(v)
            for k, old in s.snapshot.items():
                if old is _MISSING:
                    d.pop(k, None)
                elif d.get(k, _MISSING) is not old:
                    d[k] = old


def apply_write(kind: str, container: Any, ckind: str, key: Any, value: Any) -> None:
    """One recorded write, on the current call's container."""
    if ckind in ("object", "module"):
        if kind == "set":
            setattr(container, key, value)
        else:
            delattr(container, key)
    elif kind == "set":
        container[key] = value
    elif kind == "del":
        del container[key]
    elif kind == "extend":
        container.extend(value)
    else:
        container[:] = value


def instantiate(template: Any, results: list, sources: list) -> Any:
    """A written value for this call: traced values from the results, the
    arguments' containers as themselves, new containers and objects anew."""
    kind = template[0]
    if kind == "t":
        return results[template[1]]
    if kind == "src":
        return sources[template[1]]
    if kind == "const":
        return template[1]
    if kind == "seq":
        items = [instantiate(t, results, sources) for t in template[2]]
        typ = template[1]
        return typ(items) if typ in (list, tuple) else typ(*items)
    if kind == "dict":
        return {k: instantiate(t, results, sources) for k, t in template[1]}
    # "obj": a new object holding traced values: a shallow copy with them set
    obj = copy.copy(template[1])
    for k, t in template[2]:
        obj.__dict__[k] = instantiate(t, results, sources)
    return obj
