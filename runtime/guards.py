"""Guards: the conditions under which a compiled entry is valid for a call.

One representation, rendered four ways. A guard set is a list of `Check`s,
each on one value (`where[index]`, named as the user knows it) and of one
kind (its class: `ArrayCheck`, `TypeCheck`, `ValueCheck`, ...), holding what
it expects. A check states what it requires once, as an ordered list of
`Condition`s: Python source over the value, and the reason when it is false.
From those come

- the guard function: every condition joined by `and`, compiled once
  (`GuardSet`);
- the fast call's guard: the same conditions, inlined (`render_checks`, used
  by `lowering/fastpath.py`);
- the recompile reason: the reason of the first condition that, evaluated
  on the value, is false, in Dynamo's words ("'x' size mismatch at index 0:
  expected 3, got 4"), so a guard and its reason never disagree;
- the native entry's argument checks: `ArgCheck.of` in
  `lowering/codegen/entry.py` reads an `ArrayCheck`'s fields.

A new kind of guard is a new `Check` subclass with its conditions: the
relational size guards of symbolic shapes (`s0 == s1`, `s0 >= 2`) are a
check whose condition compares the dims where the symbols were bound
(`L[0].shape[1] == L[1].shape[0]`), rendered, explained and (natively)
compared like any other. So is the one guard on several arrays at once:
that those the program writes overlap no other (`OverlapCheck`).

Values are read by `path_source`, the one renderer of access paths to
Python source (a call's leaves here, attributes and items of Python state in
`lowering/capture/sources.py`)."""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from . import errors


def path_source(root: str, steps: tuple = (), ns: dict | None = None) -> str:
    """Python source reading a value: `root` (source naming an object in
    scope) then steps — ("a", name) an instance attribute, read through
    `__dict__` so no property or `__getattr__` runs; ("c", name) a class
    attribute; ("i", key) an item. A key that is not a literal is bound in
    `ns` under a name of its own."""
    s = root
    for kind, key in steps:
        if kind == "a":
            s = f"{s}.__dict__[{_key(key, ns)}]"
        elif kind == "c":
            s = f"getattr(type({s}), {key!r})"
        else:
            s = f"{s}[{_key(key, ns)}]"
    return s


def _key(key: Any, ns: dict | None) -> str:
    if type(key) in (str, int, bool) or key is None:
        return repr(key)
    if ns is None:
        raise ValueError(f"the key {key!r} is not a literal: it needs a namespace to be bound in")
    name = f"_key{id(key)}"
    ns[name] = key
    return name


def layout_of(a: np.ndarray):
    """"C", "F", or ("strided", strides) — the layout a guard pins."""
    if a.flags.c_contiguous:
        return "C"
    if a.flags.f_contiguous:
        return "F"
    return ("strided", a.strides)


def layout_class(a: np.ndarray) -> str:
    """"C", "F" or "strided": what a compiled kernel is specialized for."""
    lay = layout_of(a)
    return lay if isinstance(lay, str) else "strided"


def _layout_text(layout) -> str:
    return f"{layout}-contiguous" if isinstance(layout, str) else f"strides {layout[1]}"


@dataclass(frozen=True)
class Condition:
    """One condition of a check: `expr` is Python source in which `{x}`
    stands for the value's source (names it needs are the check's
    `constants()`); `reason(x)` says why x fails it, and is asked only when
    the condition is false."""

    expr: str
    reason: Callable[[Any], str]


# the names every rendered condition may use besides a check's constants
BASE_NAMESPACE = {"ndarray": np.ndarray}


@dataclass(frozen=True)
class Check:
    """A guard on the value `where[index]` ("L": the call's leaves, "G": the
    values read through paths of Python state), called `name` in reasons.
    A subclass is a kind of check: its fields are what it expects, its
    `conditions()` what it evaluates."""

    where: str
    index: int
    name: str

    def conditions(self) -> list[Condition]:
        raise NotImplementedError

    def constants(self) -> dict[str, Any]:
        """The objects the conditions name (a dtype, a type, a value)."""
        return {}

    def describe(self) -> str:
        raise NotImplementedError

    def const_name(self, what: str) -> str:
        return f"_{what}_{self.where}{self.index}"

    def source(self) -> str:
        """Python source of the value checked."""
        return path_source(self.where, (("i", self.index),))

    def expr(self) -> str:
        """The check as one Python condition over `L` and `G`."""
        x = self.source()
        conds = [t.expr.format(x=x) for t in self.conditions()]
        return conds[0] if len(conds) == 1 else "(" + " and ".join(conds) + ")"

    def failure(self, leaves: list, globals_: list) -> str | None:
        """Why the call's values fail this check, or None: the reason of the
        first condition that, evaluated as the guard evaluates it, is false."""
        src = leaves if self.where == "L" else globals_
        x = src[self.index] if self.index < len(src) else None
        for cond, holds in zip(self.conditions(), self._evaluators):
            if not holds(x, leaves, globals_):
                return cond.reason(x)
        return None

    @cached_property
    def _evaluators(self) -> list[Callable[[Any, list, list], bool]]:
        """Each condition compiled as a function of the value (and of
        `L` and `G`, which a condition relating two values names); built on
        the first failure asked for."""
        ns = dict(BASE_NAMESPACE, **self.constants())
        return [eval(compile(f"lambda x, L, G: {c.expr.format(x='x')}",
                             "<lowering guard condition>", "eval"), ns)
                for c in self.conditions()]


def render_checks(checks: list[Check], ns: dict) -> list[str]:
    """The checks as Python conditions over `L` and `G`, their constants
    bound in `ns`: what the guard function and the fast call inline."""
    ns.update(BASE_NAMESPACE)
    conds = []
    for c in checks:
        ns.update(c.constants())
        conds.append(c.expr())
    return conds


# ---- the kinds of checks ----------------------------------------------------

@dataclass(frozen=True)
class SizeSymbol:
    """A dim bound to a size symbol (`name`, e.g. "s0"): any size but 0 and 1
    (those are specialized); what else is known of it is a `RelationCheck`."""

    name: str

    def __repr__(self) -> str:
        return self.name


Dim = int | SizeSymbol  # what a guard pins of one dim: its exact size, or a symbol


@dataclass(frozen=True)
class ArrayCheck(Check):
    """An exact ndarray of this dtype, shape and layout ("C", "F", or
    ("strided", strides): capture decided views and copies from the exact
    strides), and, where it was writeable when traced, still writeable.

    `shape` holds one `Dim` per dim, today an exact size. Symbolic shapes
    make a size symbol another kind of `Dim`: the shape condition compares
    the rank and the exact dims only (`len(x.shape) == 2 and x.shape[0] ==
    3`), a symbol's dim is where the symbol is bound, and what is known of
    the symbol (`s0 == s1`, `s0 >= 2`) is a check of its own."""

    dtype: np.dtype
    shape: tuple[Dim, ...]
    layout: Any
    writeable: bool

    def constants(self) -> dict[str, Any]:
        return {self.const_name("dt"): self.dtype}

    def conditions(self) -> list[Condition]:
        n, dt = repr(self.name), self.dtype
        conds = [
            Condition("type({x}) is ndarray",
                      lambda x: f"{n} type mismatch: expected ndarray, got {type(x).__name__}"),
            Condition("{x}.dtype == " + self.const_name("dt"),
                      lambda x: f"{n} dtype mismatch: expected {dt}, got {x.dtype}"),
            Condition(self._shape_cond(), self._shape_reason),
            Condition(self._layout_cond(),
                      lambda x: f"{n} layout mismatch: expected {_layout_text(self.layout)}, "
                                f"got {_layout_text(layout_of(x))}"),
        ]
        if self.writeable:
            conds.append(Condition("{x}.flags.writeable", lambda x: f"{n} is read-only now"))
        return conds

    def _shape_cond(self) -> str:
        if not any(isinstance(d, SizeSymbol) for d in self.shape):
            return f"{{x}}.shape == {tuple(self.shape)!r}"
        conds = [f"len({{x}}.shape) == {len(self.shape)}"]
        for i, d in enumerate(self.shape):
            conds.append(f"{{x}}.shape[{i}] >= 2" if isinstance(d, SizeSymbol)
                         else f"{{x}}.shape[{i}] == {d!r}")
        return "(" + " and ".join(conds) + ")"

    def _layout_cond(self) -> str:
        if self.layout == "C":
            return "{x}.flags.c_contiguous"
        if self.layout == "F":
            return "({x}.flags.f_contiguous and not {x}.flags.c_contiguous)"
        return f"{{x}}.strides == {self.layout[1]!r}"

    def _shape_reason(self, x: np.ndarray) -> str:
        n = repr(self.name)
        if x.ndim != len(self.shape):
            return f"{n} rank mismatch: expected {len(self.shape)}, got {x.ndim}"
        i, want, got = next((i, a, b) for i, (a, b) in enumerate(zip(self.shape, x.shape))
                            if (b < 2 if isinstance(a, SizeSymbol) else a != b))
        if isinstance(want, SizeSymbol):
            return (f"{n} size {got} at index {i}: its symbol {want.name} stands for sizes of "
                    f"2 or more (0 and 1 are specialized)")
        return f"{n} size mismatch at index {i}: expected {want}, got {got}"

    def describe(self) -> str:
        return (f"{self.name}: ndarray {self.dtype}{list(self.shape)} "
                f"{_layout_text(self.layout)}" + (" writeable" if self.writeable else ""))


@dataclass(frozen=True)
class RelationCheck(Check):
    """A relation the compiler relied on between size symbols (`relation`,
    Python source over their names: `s1 == s2`, `s0 >= 2`), each symbol read
    from where it was bound (`bindings`: symbol -> (where, index, dim)).
    `index` and `where` name the first value it reads."""

    relation: str
    bindings: tuple  # ((symbol, where, index, dim, label), ...)

    def _sources(self) -> dict[str, str]:
        return {s: f"{path_source(w, (('i', i),))}.shape[{d}]" for s, w, i, d, _ in self.bindings}

    def conditions(self) -> list[Condition]:
        src = self._sources()
        expr = re.sub(r"\bs\d+\b", lambda m: src[m.group(0)], self.relation)
        return [Condition(expr.replace("{", "{{").replace("}", "}}"), lambda x: self._why())]

    def _why(self) -> str:
        return f"size relation {self.relation} does not hold"

    def failure(self, leaves: list, globals_: list) -> str | None:
        values = {}
        for s, w, i, d, _ in self.bindings:
            src = leaves if w == "L" else globals_
            try:
                values[s] = src[i].shape[d]
            except Exception:
                return f"size relation {self.relation}: {s} cannot be read"
        names = sorted(set(re.findall(r"\bs\d+\b", self.relation)), key=lambda s: int(s[1:]))
        try:
            holds = eval(compile(self.relation, "<lowering guard>", "eval"),
                         dict(BASE_NAMESPACE), values)
        except Exception:
            holds = False
        if holds:
            return None
        shown = ", ".join(f"{s} = {values[s]}" for s in names if s in values)
        return f"size relation {self.relation} does not hold ({shown})"

    def describe(self) -> str:
        where = ", ".join(f"{s} = {label}" for s, *_, label in self.bindings
                          if re.search(rf"\b{s}\b", self.relation))
        return f"{self.relation}  ({where})"


@dataclass(frozen=True)
class TypeCheck(Check):
    """Exactly this type: a numpy scalar ("scalar"), a Python float traced
    as a 0-d input ("float"), or an object whose contents are guarded by
    path ("object")."""

    type: type
    role: str = "object"

    def constants(self) -> dict[str, Any]:
        return {self.const_name("ty"): self.type}

    def conditions(self) -> list[Condition]:
        n, want = repr(self.name), self.type.__name__
        return [Condition("type({x}) is " + self.const_name("ty"),
                          lambda x: f"{n} type mismatch: expected {want}, "
                                    f"got {type(x).__name__}")]

    def describe(self) -> str:
        if self.role == "scalar":
            return f"{self.name}: {self.type.__name__} scalar"
        if self.role == "float":
            return f"{self.name}: float (traced as 0-d)"
        return f"{self.name}: {self.type.__name__} (contents guarded by path)"


@dataclass(frozen=True)
class ValueCheck(Check):
    """A specialized scalar: this type and this value (the program was
    traced with it as a constant). A float or complex value (Python's or a
    numpy scalar) compares by its bits: -0.0 is not 0.0 (`1 / x` tells them
    apart) and a NaN is itself."""

    value: Any

    def _bits(self) -> bytes | None:
        v = self.value
        if type(v) is float:
            return _PACK_F64(v)
        if type(v) is complex:
            return _PACK_F64(v.real) + _PACK_F64(v.imag)
        if isinstance(v, (np.floating, np.complexfloating)):
            return v.tobytes()
        return None

    def constants(self) -> dict[str, Any]:
        bits = self._bits()
        return {self.const_name("ty"): type(self.value),
                self.const_name("v"): self.value if bits is None else bits,
                "_pack_f64": _PACK_F64}

    def conditions(self) -> list[Condition]:
        def reason(x):
            return f"{self.name!r} value mismatch: expected {self.value!r}, got {x!r}"

        v = self.const_name("v")
        if type(self.value) is float:
            same = "_pack_f64({x}) == " + v
        elif type(self.value) is complex:
            same = "_pack_f64({x}.real) + _pack_f64({x}.imag) == " + v
        elif self._bits() is not None:
            same = "{x}.tobytes() == " + v
        else:
            same = "{x} == " + v
        return [Condition("type({x}) is " + self.const_name("ty"), reason),
                Condition(same, reason)]

    def describe(self) -> str:
        return f"{self.name} == {self.value!r} (specialized)"


@dataclass(frozen=True)
class ContentsCheck(Check):
    """A value the program was specialized on (Python needed it: a float
    argument in `math.sqrt(dt)`, an array element used as a slice bound):
    the same bits — a float's 8 bytes (so -0.0 is not 0.0 and a NaN is
    itself), an array's elements (its dtype, shape and layout are the
    `ArrayCheck` before it)."""

    data: bytes
    what: str  # "float" or "array"

    @classmethod
    def of(cls, where: str, index: int, name: str, value: Any) -> ContentsCheck:
        if type(value) is float:
            return cls(where, index, name, _PACK_F64(value), "float")
        return cls(where, index, name, np.ascontiguousarray(value).tobytes(), "array")

    def constants(self) -> dict[str, Any]:
        return {self.const_name("bits"): self.data, "_pack_f64": _PACK_F64}

    def conditions(self) -> list[Condition]:
        def reason(x):
            return (f"{self.name!r} value changed (the program was specialized on "
                    f"{'its value' if self.what == 'float' else 'its elements'})")

        bits = self.const_name("bits")
        if self.what == "float":
            return [Condition("type({x}) is float", reason),
                    Condition("_pack_f64({x}) == " + bits, reason)]
        return [Condition("{x}.tobytes() == " + bits, reason)]

    def describe(self) -> str:
        if self.what == "float":
            return f"{self.name} == {_UNPACK_F64(self.data)[0]!r} (specialized: Python used its value)"
        return f"{self.name}: its {len(self.data)} bytes as traced (specialized: Python used them)"


_PACK_F64 = struct.Struct("<d").pack
_UNPACK_F64 = struct.Struct("<d").unpack


@dataclass(frozen=True)
class IdentityCheck(Check):
    """The very object seen when compiling (a callable, an opaque object)."""

    obj: Any

    def constants(self) -> dict[str, Any]:
        return {self.const_name("v"): self.obj}

    def conditions(self) -> list[Condition]:
        return [Condition("{x} is " + self.const_name("v"),
                          lambda x: f"{self.name!r} is a different object than when compiled")]

    def describe(self) -> str:
        return f"{self.name} is the same object"


@dataclass(frozen=True)
class SameAsCheck(Check):
    """The same object as `other_where[other_index]`: an argument passed
    twice, an array of Python state that is an argument ("G" to "L") or
    another path's array."""

    other_where: str
    other_index: int

    def conditions(self) -> list[Condition]:
        other = path_source(self.other_where, (("i", self.other_index),))
        # state reached again as an argument is an array; otherwise any object
        what = "array" if self.where != self.other_where else "object"
        return [Condition("{x} is " + other,
                          lambda x: f"{self.name!r} no longer is the same {what} as argument "
                                    f"{self.other_index}")]

    def describe(self) -> str:
        return f"{self.name} is argument {self.other_index}"


@dataclass(frozen=True)
class LenCheck(Check):
    """A container of this length (on the path of a value read, or rewritten
    whole)."""

    length: int

    def conditions(self) -> list[Condition]:
        return [Condition(f"len({{x}}) == {self.length!r}",
                          lambda x: f"{self.name!r} length mismatch: expected {self.length}, "
                                    f"got {len(x)}")]

    def describe(self) -> str:
        return f"len({self.name}) == {self.length}"


@dataclass(frozen=True)
class OverlapCheck(Check):
    """The arrays the program writes share no memory with any other array
    it reads or writes (`arrays`: (where, index, name) of each distinct
    array of the entry, the `n_written` it writes first). The entry was
    traced with these arrays distinct (an argument passed twice is a
    `SameAsCheck` and is not among them), so two of them being one object
    now is an alias its program knows nothing of, as much as two views
    that overlap: either way the program would read what numpy reads after
    the write. `index` and `where` name the first written array."""

    arrays: tuple  # ((where, index, name), ...), the written ones first
    n_written: int

    def constants(self) -> dict[str, Any]:
        return {"_overlap": _overlap}

    def _tuple(self) -> str:
        return "(" + "".join(f"{path_source(w, (('i', i),))}, " for w, i, _ in self.arrays) + ")"

    def conditions(self) -> list[Condition]:
        return [Condition(f"not _overlap({self._tuple()}, {self.n_written})", self._why)]

    def pair(self, leaves: list, globals_: list) -> tuple[str, str, bool] | None:
        """The first written array that shares memory with another: their
        names, and whether they are the very same object."""
        vals = [(leaves if w == "L" else globals_)[i] for w, i, _ in self.arrays]
        for a in range(self.n_written):
            for b in range(a + 1, len(vals)):
                if vals[a] is vals[b] or np.may_share_memory(vals[a], vals[b]):
                    return self.arrays[a][2], self.arrays[b][2], vals[a] is vals[b]
        return None

    def apart_as_aliases(self, leaves: list, globals_: list) -> bool:
        """Whether the arrays would pass with each object counted once: the
        only overlaps are arguments passed twice, which a trace with them so
        models (a `SameAsCheck`); views that overlap it cannot."""
        seen: dict[int, int] = {}
        vals, written = [], []
        for k, (w, i, _) in enumerate(self.arrays):
            x = (leaves if w == "L" else globals_)[i]
            if id(x) in seen:
                written[seen[id(x)]] |= k < self.n_written
                continue
            seen[id(x)] = len(vals)
            vals.append(x)
            written.append(k < self.n_written)
        order = sorted(range(len(vals)), key=lambda k: not written[k])
        return not _overlap(tuple(vals[k] for k in order), sum(written))

    def failure(self, leaves: list, globals_: list) -> str | None:
        try:
            p = self.pair(leaves, globals_)
        except Exception:
            return "the arrays the function writes cannot be compared with the others"
        if p is None:
            return None
        a, b, same = p
        if same:
            return (f"{a!r} and {b!r} are the same array now (traced as two) and the "
                    f"function writes {a!r}")
        return f"{a!r} and {b!r} overlap in memory and the function writes {a!r}"

    def _why(self, x) -> str:  # (failure() names the pair)
        return "an array the function writes overlaps another"

    def describe(self) -> str:
        written = ", ".join(n for _, _, n in self.arrays[:self.n_written])
        others = ", ".join(n for _, _, n in self.arrays[self.n_written:])
        return (f"written {written} share no memory with each other"
                + (f" or with {others}" if others else "") + " (not even as one object)")


@dataclass(frozen=True)
class FlagsCheck(Check):
    """The calling thread's `np.errstate` ignores every floating-point
    category of `categories` (np.errstate's keywords): the entry's programs
    were compiled under an errstate that ignored them and dropped unused ops
    that raise only those (`passes/keep_flags.py`), whose warnings or
    exceptions numpy would give under another. Not a check on a value:
    `where` is "E" (the errstate), named `name`."""

    categories: tuple[str, ...]

    def constants(self) -> dict[str, Any]:
        return {"_fp_reported": errors.reported_mask}

    def conditions(self) -> list[Condition]:
        bits = errors.mask_of(self.categories)
        return [Condition(f"not (_fp_reported() & {bits})", self._why)]

    def _why(self, x=None) -> str:
        acted = [c for c in errors.reported_categories() if c in self.categories]
        return (f"np.errstate acts on {', '.join(acted) or 'them'} now, which was compiled "
                f"ignoring {', '.join(self.categories)} (unused ops of those were dropped)")

    def failure(self, leaves: list, globals_: list) -> str | None:
        return self._why() if errors.reported_mask() & errors.mask_of(self.categories) else None

    def describe(self) -> str:
        return f"np.errstate ignores {', '.join(self.categories)}"


may_share_memory = np.may_share_memory


def _overlap(arrays: tuple, n_written: int) -> bool:
    """Does one of the first `n_written` arrays share memory with another
    (the same object counts)? Read-only arrays may overlap each other."""
    for a in range(n_written):
        x = arrays[a]
        for b in range(a + 1, len(arrays)):
            if x is arrays[b] or may_share_memory(x, arrays[b]):
                return True
    return False


class GuardSet:
    """An entry's checks, plus what no single value says: the structure of
    the arguments (`treedef`, the leaf count). That the arrays it writes
    overlap no other is a check like any other (`OverlapCheck`), so every
    rendering of the guard (this function, the fast call's inlined guard,
    the native entry, which has no form for it and so does not apply)
    carries it."""

    def __init__(self, treedef: Any, n_leaves: int, checks: list[Check]):
        self.treedef = treedef
        self.n_leaves = n_leaves
        self.checks = checks
        self._fn = self._generate()

    @property
    def no_overlap(self) -> bool:
        """Whether the entry needs its written arrays apart from the others."""
        return any(isinstance(c, OverlapCheck) for c in self.checks)

    def overlaps(self, leaves: list, globals_: list) -> bool:
        """Whether this call's arrays fail the entry's overlap check (and
        only that is asked)."""
        return any(isinstance(c, OverlapCheck) and c.failure(leaves, globals_) is not None
                   for c in self.checks)

    def only_views_overlap(self, treedef, leaves: list, globals_: list) -> bool:
        """Whether every check but the overlap check holds, and that one
        fails for views that overlap (not only for an argument passed twice):
        a call no trace can serve, which numpy runs (a trace with those
        arrays would be refused by its own overlap check)."""
        if treedef != self.treedef or len(leaves) != self.n_leaves:
            return False
        over = [c for c in self.checks if isinstance(c, OverlapCheck)]
        try:
            return (bool(over) and all(c.failure(leaves, globals_) is None for c in self.checks
                                       if not isinstance(c, OverlapCheck))
                    and not all(c.apart_as_aliases(leaves, globals_) for c in over))
        except Exception:
            return False

    def _generate(self):
        ns: dict[str, Any] = {"_treedef": self.treedef}
        conds = [f"n == {self.n_leaves}"] + render_checks(self.checks, ns)
        src = ("def guard(treedef, L, G):\n    n = len(L)\n    return treedef == _treedef and "
               + " and ".join(conds) + "\n")
        exec(compile(src, "<lowering guard>", "exec"), ns)
        self.source = src
        return ns["guard"]

    def __call__(self, treedef, leaves, globals_) -> bool:
        try:
            return bool(self._fn(treedef, leaves, globals_))
        except Exception:
            return False

    def why(self, treedef, leaves, globals_) -> str:
        if treedef != self.treedef:
            return "the structure of the arguments changed (number of args, keywords, or containers)"
        for c in self.checks:
            msg = c.failure(leaves, globals_)
            if msg:
                return msg
        return "no guard failed"

    def describe(self) -> list[str]:
        return [c.describe() for c in self.checks]
