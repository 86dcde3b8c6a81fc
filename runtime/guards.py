"""Guards: the conditions under which a compiled entry is valid for a call.

A guard set is data (a list of `Check`s) compiled once into one generated
Python function for the fast path; when it fails, the same checks are walked
one by one to say which failed, in Dynamo's words ("'x' size mismatch at index
0: expected 3, got 4")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


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


@dataclass
class Check:
    where: str  # "L" (call leaves) or "G" (globals/closures)
    index: int
    name: str
    kind: str  # "array" | "generic" | "float" | "value" | "identity" | "alias" | "is_leaf" | "type" | "len"
    expected: Any = None

    def expr(self) -> str:
        x = f"{self.where}[{self.index}]"
        k = self.kind
        if k == "array":
            dt, shape, layout, writeable = self.expected
            # a strided input is guarded by its exact strides: capture decided
            # views and copies (reshape) from them
            if layout == "C":
                lay = f"{x}.flags.c_contiguous"
            elif layout == "F":
                lay = f"({x}.flags.f_contiguous and not {x}.flags.c_contiguous)"
            else:
                lay = f"{x}.strides == {layout[1]!r}"
            w = f" and {x}.flags.writeable" if writeable else ""
            return (f"(type({x}) is ndarray and {x}.dtype == {self.index_name('dt')} and "
                    f"{x}.shape == {shape!r} and {lay}{w})")
        if k == "generic":
            return f"type({x}) is {self.index_name('ty')}"
        if k == "float":
            return f"type({x}) is float"
        if k == "value":
            return f"(type({x}) is {self.index_name('ty')} and {x} == {self.index_name('v')})"
        if k == "identity":
            return f"{x} is {self.index_name('v')}"
        if k == "alias":
            return f"{x} is {self.where}[{self.expected}]"
        if k == "is_leaf":
            return f"{x} is L[{self.expected}]"
        if k == "type":
            return f"type({x}) is {self.index_name('ty')}"
        if k == "len":
            return f"len({x}) == {self.expected!r}"
        raise ValueError(k)

    def index_name(self, what: str) -> str:
        return f"_{what}_{self.where}{self.index}"

    def constants(self) -> dict[str, Any]:
        if self.kind == "array":
            return {self.index_name("dt"): self.expected[0]}
        if self.kind in ("generic", "type"):
            return {self.index_name("ty"): self.expected}
        if self.kind == "value":
            return {self.index_name("ty"): type(self.expected), self.index_name("v"): self.expected}
        if self.kind == "identity":
            return {self.index_name("v"): self.expected}
        return {}

    def failure(self, x: Any, other: Any = None) -> str | None:
        """Why x fails this check, or None."""
        n = repr(self.name)
        k = self.kind
        if k == "array":
            dt, shape, layout, writeable = self.expected
            if type(x) is not np.ndarray:
                return f"{n} type mismatch: expected ndarray, got {type(x).__name__}"
            if x.dtype != dt:
                return f"{n} dtype mismatch: expected {dt}, got {x.dtype}"
            if x.ndim != len(shape):
                return f"{n} rank mismatch: expected {len(shape)}, got {x.ndim}"
            for i, (a, b) in enumerate(zip(shape, x.shape)):
                if a != b:
                    return f"{n} size mismatch at index {i}: expected {a}, got {b}"
            if layout_of(x) != layout:
                want = f"{layout}-contiguous" if isinstance(layout, str) else f"strides {layout[1]}"
                got = layout_of(x)
                got = f"{got}-contiguous" if isinstance(got, str) else f"strides {got[1]}"
                return f"{n} layout mismatch: expected {want}, got {got}"
            if writeable and not x.flags.writeable:
                return f"{n} is read-only now"
            return None
        if k == "generic":
            return None if type(x) is self.expected else f"{n} type mismatch: expected {self.expected.__name__}, got {type(x).__name__}"
        if k == "float":
            return None if type(x) is float else f"{n} type mismatch: expected float, got {type(x).__name__}"
        if k == "value":
            if type(x) is not type(self.expected) or x != self.expected:
                return f"{n} value mismatch: expected {self.expected!r}, got {x!r}"
            return None
        if k == "identity":
            return None if x is self.expected else f"{n} is a different object than when compiled"
        if k == "alias":
            same = x is other
            return None if same else f"{n} no longer is the same object as argument {self.expected}"
        if k == "is_leaf":
            return None if x is other else f"{n} no longer is the same array as argument {self.expected}"
        if k == "type":
            return None if type(x) is self.expected else f"{n} type mismatch: expected {self.expected.__name__}, got {type(x).__name__}"
        if k == "len":
            return None if len(x) == self.expected else f"{n} length mismatch: expected {self.expected}, got {len(x)}"
        return None

    def describe(self) -> str:
        k = self.kind
        if k == "array":
            dt, shape, layout, w = self.expected
            lay = f"{layout}-contiguous" if isinstance(layout, str) else f"strides {layout[1]}"
            return f"{self.name}: ndarray {dt}{list(shape)} {lay}" + (" writeable" if w else "")
        if k == "generic":
            return f"{self.name}: {self.expected.__name__} scalar"
        if k == "float":
            return f"{self.name}: float (traced as 0-d)"
        if k == "value":
            return f"{self.name} == {self.expected!r} (specialized)"
        if k == "identity":
            return f"{self.name} is the same object"
        if k == "type":
            return f"{self.name}: {self.expected.__name__} (contents guarded by path)"
        if k == "len":
            return f"len({self.name}) == {self.expected}"
        if k == "is_leaf":
            return f"{self.name} is argument {self.expected}"
        return f"{self.name} is argument {self.expected}"


class GuardSet:
    def __init__(self, treedef: Any, n_leaves: int, checks: list[Check], no_overlap: bool,
                 array_leaves: list[int], global_arrays: list[int] = ()):
        self.treedef = treedef
        self.n_leaves = n_leaves
        self.checks = checks
        self.no_overlap = no_overlap  # mutating entries need distinct, non-overlapping arrays
        self.array_leaves = array_leaves
        self.global_arrays = list(global_arrays)  # arrays read through paths (state)
        self._fn = self._generate()

    def _generate(self):
        ns: dict[str, Any] = {"ndarray": np.ndarray, "_overlap": _overlap, "_treedef": self.treedef}
        conds = [f"n == {self.n_leaves}"]
        for c in self.checks:
            ns.update(c.constants())
            conds.append(c.expr())
        if self.no_overlap:
            conds.append(f"not _overlap(L, {self.array_leaves!r}, G, {self.global_arrays!r})")
        src = "def guard(treedef, L, G):\n    n = len(L)\n    return treedef == _treedef and " + " and ".join(conds) + "\n"
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
            src = leaves if c.where == "L" else globals_
            x = src[c.index] if c.index < len(src) else None
            other = (src[c.expected] if c.kind == "alias"
                     else leaves[c.expected] if c.kind == "is_leaf" else None)
            msg = c.failure(x, other)
            if msg:
                return msg
        if self.no_overlap and _overlap(leaves, self.array_leaves, globals_, self.global_arrays):
            return "two array arguments overlap in memory and the function writes to its inputs"
        return "no guard failed"

    def describe(self) -> list[str]:
        out = [c.describe() for c in self.checks]
        if self.no_overlap:
            out.append("array arguments do not overlap in memory (the function mutates inputs)")
        return out


def _overlap(leaves, idx, globals_=(), gidx=()) -> bool:
    """Do written arrays overlap? Arguments that are the same object are
    guarded as aliases; a state array that is an argument (or another state
    array) now but was not when traced counts as overlap."""
    arrs = [leaves[i] for i in idx]
    gs = [globals_[i] for i in gidx]
    for i in range(len(arrs)):
        for j in range(i + 1, len(arrs)):
            if arrs[i] is not arrs[j] and np.may_share_memory(arrs[i], arrs[j]):
                return True
    every = arrs + gs
    for i in range(len(arrs), len(every)):
        for j in range(i):
            if np.may_share_memory(every[i], every[j]):
                return True
    return False
