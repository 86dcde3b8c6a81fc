"""Size symbols: the sizes of a function compiled for many shapes.

A dim that varies from call to call (`dynamic=True`, `mark_dynamic`, or a
recompile caused by a size change) is a named symbol `s0`, `s1`, ... Its
value in the IR is a `SymDim`: an `int` equal to the size seen when
compiling (the hint, which the passes compute with as before) that also
carries its expression over the symbols (`"s0"`, `"(s0*s1)"`). Arithmetic
on sizes keeps the expression, so the shapes, extents, offsets and strides
the passes derive from a symbolic size are symbolic too; a kernel parameter
or a buffer size built from one is evaluated at each call from the
arguments' shapes.

Every decision the compiler takes on a symbolic size is recorded: a
comparison (`<`, `==`, ...) answers for the hint and records the relation
that held (`s0 >= 2`, `s1 == s2`) in the active `ShapeEnv`; the program is
valid exactly where all recorded relations hold, and they are its guards.
An operation with no symbolic form (`int()`, `/`, bit operations) answers
for the hint and records that the size equals it (text, `str` and format,
is the hint's: the IR prints the sizes seen when compiling): the program is
specialized to that size, never wrong for another. What Python's C code
does with an int (numpy on a shape, `range`) cannot be seen from here; the
compiler therefore compiles a symbolic program a second time at other
sizes and keeps it only where both agree (see `lowering/dynamic.py`).

A `SymDim` hashes apart from the plain int of its value (it still compares
equal to it): a cache keyed by shapes or types never hands a program
compiled for one size to a symbolic one, or the reverse."""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Iterable
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np

_state = threading.local()


class ShapeEnv:
    """The symbols of one compile and the relations recorded on them
    (Python source over the symbol names, in the order first met)."""

    def __init__(self):
        self.hints: dict[str, int] = {}  # symbol -> the size seen when compiling
        self.relations: dict[str, None] = {}  # (an ordered set)

    def symbol(self, hint: int) -> "SymDim":
        name = f"s{len(self.hints)}"
        self.hints[name] = int(hint)
        return SymDim(hint, name)

    def record(self, relation: str) -> None:
        self.relations.setdefault(relation, None)

    def __enter__(self) -> "ShapeEnv":
        stack = getattr(_state, "stack", None)
        if stack is None:
            stack = _state.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _state.stack.pop()


def active() -> ShapeEnv | None:
    stack = getattr(_state, "stack", None)
    return stack[-1] if stack else None


def _record(relation: str) -> None:
    env = active()
    if env is not None:
        if _TRACE_RELATIONS and relation not in env.relations:
            import traceback
            traceback.print_stack(limit=8)
            print("recorded:", relation)
        env.record(relation)


_TRACE_RELATIONS = bool(__import__("os").environ.get("LOWERING_TRACE_RELATIONS"))


def expr_of(x) -> str:
    """Python source for a size: a symbolic one's expression, else its digits."""
    return x.expr if isinstance(x, SymDim) else repr(int(x))


def is_symbolic(x) -> bool:
    return isinstance(x, (SymDim, SymStr))


def hint(x) -> int:
    """A size's value when compiling, recording nothing: for choices that
    change speed, not results (a vector width, a thread count)."""
    return int.__int__(x) if isinstance(x, SymDim) else int(x)


_INTS = (int, np.integer)
_NEGATE = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge}


def _compare(op: str, a, b) -> bool:
    holds = _COMPARE[op](int.__int__(a) if isinstance(a, SymDim) else int(a),
                         int.__int__(b) if isinstance(b, SymDim) else int(b))
    if isinstance(a, Unguarded) or isinstance(b, Unguarded):
        return holds
    ea, eb = expr_of(a), expr_of(b)
    if ea != eb:
        rel = op if holds else _NEGATE[op]
        # two sizes found different were kept apart: code for unequal sizes
        # serves equal ones too (each reads its own), so that is not a guard
        if rel == "!=" and isinstance(a, SymDim) and isinstance(b, SymDim):
            return holds
        if not _implied(ea, rel, eb):
            _record(f"{ea} {rel} {eb}")
    return holds


_HUGE = 1 << 62  # no size reaches this: a range check against it always holds


def _implied(a: str, rel: str, b: str) -> bool:
    """Relations every size satisfies: within the range of an i64 (what an
    attribute's verifier checks), and, for a symbol, never 0 or 1 (those
    sizes are specialized): `s0 != 1`, `s0 > 1`, `s0 >= 0`, ..."""
    if b.lstrip("-").isdigit() and abs(int(b)) >= _HUGE:
        c = int(b)
        return (rel in ("<", "<=", "!=") and c > 0) or (rel in (">", ">=", "!=") and c < 0)
    if a.lstrip("-").isdigit() and abs(int(a)) >= _HUGE:
        return _implied(b, {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(rel, rel), a)
    if not (a.isidentifier() and b.lstrip("-").isdigit()):
        if b.isidentifier() and a.lstrip("-").isdigit():
            return _implied(b, {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(rel, rel), a)
        return False
    c = int(b)
    return ((rel == "!=" and c <= 1) or (rel == ">" and c <= 1) or (rel == ">=" and c <= 2))


def _specialize(x: "SymDim") -> int:
    v = int.__int__(x)
    _record(f"{x.expr} == {v}")
    return v


def _arith(op: str, fn: Callable, a, b):
    if not isinstance(a, _INTS) or not isinstance(b, _INTS):
        return NotImplemented
    v = fn(int.__int__(a) if isinstance(a, SymDim) else int(a),
           int.__int__(b) if isinstance(b, SymDim) else int(b))
    ea, eb = expr_of(a), expr_of(b)
    # simplifications that keep expressions short (and equal where they are)
    if op == "+" and eb == "0" or op == "-" and eb == "0" or op in ("*", "//") and eb == "1":
        return a
    if op == "+" and ea == "0" or op == "*" and ea == "1":
        return b
    if op == "*" and "0" in (ea, eb):
        return 0
    return SymDim(v, f"({ea}{op}{eb})")


class SymDim(int):
    """A size: its value when compiling (`int`), and `expr`, its expression
    over the size symbols. See the module's docstring."""

    def __new__(cls, value: int, expr: str):
        obj = int.__new__(cls, value)
        obj.expr = expr
        return obj

    def __repr__(self) -> str:
        return f"{self.expr}={int.__int__(self)}"

    def __reduce__(self):
        return (SymDim, (int.__int__(self), self.expr))

    def __hash__(self) -> int:
        return hash(("sym", int.__int__(self), self.expr))

    # arithmetic keeps the expression
    def __add__(self, o): return _arith("+", operator.add, self, o)
    def __radd__(self, o): return _arith("+", operator.add, o, self)
    def __sub__(self, o): return _arith("-", operator.sub, self, o)
    def __rsub__(self, o): return _arith("-", operator.sub, o, self)
    def __mul__(self, o): return _arith("*", operator.mul, self, o)
    def __rmul__(self, o): return _arith("*", operator.mul, o, self)
    def __floordiv__(self, o): return _arith("//", operator.floordiv, self, o)
    def __rfloordiv__(self, o): return _arith("//", operator.floordiv, o, self)
    def __mod__(self, o): return _arith("%", operator.mod, self, o)
    def __rmod__(self, o): return _arith("%", operator.mod, o, self)
    def __neg__(self): return SymDim(-int.__int__(self), f"(-{self.expr})")
    def __pos__(self): return self

    def __abs__(self):
        return self if self >= 0 else -self

    # decisions record the relation that held
    def __eq__(self, o):
        return _compare("==", self, o) if isinstance(o, _INTS) else NotImplemented
    def __ne__(self, o):
        return _compare("!=", self, o) if isinstance(o, _INTS) else NotImplemented
    def __lt__(self, o):
        return _compare("<", self, o) if isinstance(o, _INTS) else NotImplemented
    def __le__(self, o):
        return _compare("<=", self, o) if isinstance(o, _INTS) else NotImplemented
    def __gt__(self, o):
        return _compare(">", self, o) if isinstance(o, _INTS) else NotImplemented
    def __ge__(self, o):
        return _compare(">=", self, o) if isinstance(o, _INTS) else NotImplemented
    def __bool__(self):
        return _compare("!=", self, 0)

    # no symbolic form: specialized to the value
    def __int__(self): return _specialize(self)
    def __index__(self): return _specialize(self)
    def __float__(self): return float(_specialize(self))
    def __truediv__(self, o): return _specialize(self) / o
    def __rtruediv__(self, o): return o / _specialize(self)
    def __pow__(self, o, m=None): return pow(_specialize(self), o, m)
    def __rpow__(self, o): return o ** _specialize(self)
    def __and__(self, o): return _specialize(self) & o
    def __rand__(self, o): return o & _specialize(self)
    def __or__(self, o): return _specialize(self) | o
    def __ror__(self, o): return o | _specialize(self)
    def __xor__(self, o): return _specialize(self) ^ o
    def __rxor__(self, o): return o ^ _specialize(self)
    def __lshift__(self, o): return _specialize(self) << o
    def __rshift__(self, o): return _specialize(self) >> o
    def __divmod__(self, o): return divmod(_specialize(self), o)
    # printed as its value (the IR's text shows the sizes seen when compiling)
    def __format__(self, spec): return format(int.__int__(self), spec)
    def __str__(self): return str(int.__int__(self))
    def bit_length(self): return _specialize(self).bit_length()


class Unguarded(SymDim):
    """A number evaluated per call whose value changes speed, not results (a
    launch's thread count): decisions on it record nothing."""

    def __reduce__(self):
        return (Unguarded, (int.__int__(self), self.expr))


class SymStr(str):
    """A constant's text (what `array.constant` and `loop.const` hold) whose
    value comes from sizes: the text for the sizes seen when compiling, and
    `expr`, Python source of its value over the symbols (`float(s1)`)."""

    def __new__(cls, text: str, expr: str):
        obj = str.__new__(cls, text)
        obj.expr = expr
        return obj

    def __hash__(self) -> int:
        return hash(("sym", str.__str__(self), self.expr))

    def __eq__(self, o):
        if isinstance(o, SymStr):
            return str.__eq__(self, o) and self.expr == o.expr
        return False if isinstance(o, str) else NotImplemented

    def __ne__(self, o):
        r = self.__eq__(o)
        return r if r is NotImplemented else not r

    def __reduce__(self):
        return (SymStr, (str.__str__(self), self.expr))


def constant_text(value, text: str, kind: str) -> str:
    """The text of a constant made from `value`: a SymStr where the value is
    a symbolic size (`kind` "f" or "i": float or int value)."""
    if not isinstance(value, SymDim):
        return text
    return SymStr(text, f"float({value.expr})" if kind == "f" else value.expr)


def symbols_in(x) -> bool:
    """Does a value, a tuple, or an xDSL type or attribute hold a symbolic size?"""
    if isinstance(x, (SymDim, SymStr)):
        return True
    if isinstance(x, (tuple, list)):
        return any(symbols_in(e) for e in x)
    shape = getattr(x, "get_shape", None)
    if shape is not None:
        try:
            return any(isinstance(d, SymDim) for d in shape())
        except Exception:
            return False
    return False


def sym_key(x):
    """What sets a symbolic value apart from the plain one of equal value
    (for keys built with ==): the expressions in it, or None."""
    if isinstance(x, (SymDim, SymStr)):
        return x.expr
    shape = getattr(x, "get_shape", None)
    if shape is not None:
        try:
            dims = shape()
        except Exception:
            return None
        if any(isinstance(d, SymDim) for d in dims):
            return tuple(d.expr if isinstance(d, SymDim) else None for d in dims)
    return None


def parallel_threads(touched, work, threads: int, threshold: int):
    """How many threads a launch splits its work across: one below
    `threshold` elements touched (waking a thread costs more), else up to
    `threads`, never more than the work's points. For symbolic sizes, the
    number each call's sizes give (a `SymDim` evaluated at the launch)."""
    t, w = hint(touched), hint(work)
    n = 1 if t < threshold else max(min(threads, w), 1)
    if isinstance(touched, SymDim) or isinstance(work, SymDim):
        return Unguarded(n, f"parallel_threads({expr_of(touched)}, {expr_of(work)}, "
                            f"{threads}, {threshold})")
    return n


_NAMESPACE = {"float": float, "parallel_threads": parallel_threads}


def evaluator(exprs: Iterable[str], names: Iterable[str]) -> Callable[..., tuple]:
    """One compiled function of the symbols (`names`, positional) returning
    the value of each expression."""
    names = list(names)
    exprs = list(exprs)
    body = ", ".join(exprs) + ("," if len(exprs) == 1 else "")
    src = f"lambda {', '.join(names)}: ({body})"
    return eval(compile(src, "<lowering sizes>", "eval"), dict(_NAMESPACE))


def evaluate(expr: str, values: dict[str, int]) -> Any:
    return eval(compile(expr, "<lowering sizes>", "eval"), dict(_NAMESPACE), dict(values))


def symbols_of(obj) -> tuple:
    """The expressions of the symbolic sizes inside a value (tuples, lists,
    dicts, dataclasses, xDSL attributes and types, i64 arrays), in order; ()
    where there are none. What a key built with `==` adds to tell a symbolic
    value from the plain one of equal value, and how the compiler finds a
    size symbol left in what must be free of them (a kernel's compiled
    body). Each container is looked into once (keys share subtrees)."""
    out: list = []
    seen: set[int] = set()
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, (SymDim, SymStr)):
            out.append(x.expr)
            continue
        if isinstance(x, (str, bytes, int, float, bool, type(None))):
            continue
        if id(x) in seen:
            continue
        seen.add(id(x))
        sym = getattr(x, "_symbolic", None)
        if isinstance(sym, tuple):
            out.extend(expr_of(v) if isinstance(v, SymDim) else None for v in sym)
            continue
        if isinstance(x, (tuple, list)):
            stack.extend(reversed(x))
        elif isinstance(x, (frozenset, set)):
            stack.extend(sorted(x, key=repr))
        elif isinstance(x, dict):
            stack.extend(reversed(list(x.items())))
        elif is_dataclass(x) and not isinstance(x, type) and not hasattr(x, "parameters"):
            stack.extend(reversed([getattr(x, f.name) for f in fields(x)]))
        else:
            params = getattr(x, "parameters", None)
            if isinstance(params, tuple):
                stack.extend(reversed(params))
            elif hasattr(x, "data") and not callable(x.data):
                stack.append(x.data)
    return tuple(out)


def broadcast_shapes(*shapes) -> tuple:
    """numpy's `broadcast_shapes`, for shapes that may hold symbolic sizes:
    each dim the one size all non-1 sizes equal (a relation recorded where
    two symbols meet), numpy's error where they do not."""
    shapes = [tuple(s) for s in shapes]
    if not any(isinstance(d, SymDim) for s in shapes for d in s):
        return tuple(np.broadcast_shapes(*shapes))
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(rank):
        dims = [s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0]
        size = 1
        for d in dims:
            if d == 1:
                continue
            if size == 1:
                size = d
            elif d != size:
                np.broadcast_shapes(*[tuple(hint(d) for d in s) for s in shapes])  # numpy's error
                raise ValueError("shape mismatch: objects cannot be broadcast to a single shape")
        out.append(size)
    return tuple(out)


def same_shape(a, b) -> bool:
    """a == b for shapes, ranks first (a tuple compares items up to the
    shorter one's end: two symbols met that way would record a relation
    nothing relies on)."""
    a, b = tuple(a), tuple(b)
    return len(a) == len(b) and all(x == y for x, y in zip(a, b))


def same_type(a, b) -> bool:
    """a == b for xDSL types, shaped ones rank first (see `same_shape`)."""
    sa, sb = getattr(a, "get_shape", None), getattr(b, "get_shape", None)
    if sa is not None and sb is not None:
        if type(a) is not type(b) or getattr(a, "element_type", None) != getattr(b, "element_type", None):
            return False
        if not same_shape(sa(), sb()):
            return False
    return a == b
