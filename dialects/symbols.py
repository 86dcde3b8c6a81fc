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
compiler therefore compiles a symbolic program twice more at other
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
        env.record(relation)



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


# ---- expressions: polynomials over atoms -------------------------------------
# A size's expression is kept as a polynomial with int coefficients over
# atoms (a symbol's name, or an expression that is not a polynomial: a floor
# division or remainder that does not simplify, a function of sizes), so that
# equal sizes reached two ways have one expression ((s0 - 1) + 1 is s0, and
# (s0*s1)//s0 is s1), and a relation is written once whichever way it was
# met (`s1 - 1 == s2 - 1` is `s1 == s2`).
Poly = tuple  # ((monomial, coefficient), ...) sorted; monomial: ((atom, power), ...) sorted


def _poly_of(x) -> dict:
    if isinstance(x, SymDim):
        return dict(x.poly)
    return {(): int(x)} if int(x) else {}


def _norm(p: dict) -> Poly:
    return tuple(sorted((m, c) for m, c in p.items() if c))


def _padd(a: dict, b: dict, sign: int = 1) -> dict:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + sign * c
    return {m: c for m, c in out.items() if c}


def _mono_mul(m1: tuple, m2: tuple) -> tuple:
    d: dict = dict(m1)
    for a, k in m2:
        d[a] = d.get(a, 0) + k
    return tuple(sorted(d.items()))


def _pmul(a: dict, b: dict) -> dict:
    out: dict = {}
    for m1, c1 in a.items():
        for m2, c2 in b.items():
            m = _mono_mul(m1, m2)
            out[m] = out.get(m, 0) + c1 * c2
    return {m: c for m, c in out.items() if c}


def _mono_div(m: tuple, d: tuple) -> tuple | None:
    """m / d for monomials, or None where d does not divide m."""
    out = dict(m)
    for a, k in d:
        if out.get(a, 0) < k:
            return None
        out[a] -= k
    return tuple(sorted((a, k) for a, k in out.items() if k))


def _render_mono(m: tuple) -> str:
    return "*".join(a if k == 1 else "*".join([a] * k) for a, k in m)


def render(p: Poly) -> str:
    """Python source for a polynomial (a lone atom as itself)."""
    if not p:
        return "0"
    if len(p) == 1 and p[0][1] == 1 and len(p[0][0]) == 1 and p[0][0][0][1] == 1:
        return p[0][0][0][0]  # a lone atom
    terms = sorted(p, key=lambda t: (-sum(k for _, k in t[0]), t[0]))
    out = ""
    for m, c in terms:
        body = _render_mono(m)
        mag = abs(c)
        text = (f"{mag}*{body}" if mag != 1 else body) if body else str(mag)
        out += (("-" if c < 0 else "") + text) if not out else ((" - " if c < 0 else " + ") + text)
    return f"({out})"


def _atom(text: str) -> Poly:
    return ((((text, 1),), 1),)


def _from_poly(value: int, p: dict):
    """The size of polynomial p (a plain int where p is a constant)."""
    n = _norm(p)
    if not n:
        return 0
    if len(n) == 1 and n[0][0] == ():
        return n[0][1]
    return SymDim(value, render(n), n)


def _divide(value: int, a, b, op: str):
    """a // b or a % b (b > 0 where this simplifies), symbolic."""
    pa, pb = _poly_of(a), _poly_of(b)
    if len(pb) == 1:
        (mb, cb), = pb.items()
        if cb > 0:
            quot: dict = {}
            exact = True
            for m, c in pa.items():
                q = _mono_div(m, mb)
                if q is None or c % cb:
                    exact = False
                    break
                quot[q] = c // cb
            if exact:  # b divides every term: an exact quotient, no remainder
                return _from_poly(value, quot) if op == "//" else 0
    return SymDim(value, f"({expr_of(a)}{op}{expr_of(b)})")


def _relation(op: str, a, b) -> str | None:
    """The relation `a op b` written canonically (a polynomial against a
    constant, the leading coefficient positive; two symbols as `sA == sB`),
    or None where it holds for every size (the difference is constant)."""
    d = _padd(_poly_of(a), _poly_of(b), -1)
    k = d.pop((), 0)
    if not d:
        return None
    n = _norm(d)
    leading = sorted(n, key=lambda t: (-sum(x for _, x in t[0]), t[0]))[0][1]
    if leading < 0:
        n = tuple((m, -c) for m, c in n)
        k = -k
        op = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
    if (k == 0 and len(n) == 2 and all(len(m) == 1 and m[0][1] == 1 for m, _ in n)
            and sorted(c for _, c in n) == [-1, 1]):
        pos = next(_render_mono(m) for m, c in n if c == 1)
        neg = next(_render_mono(m) for m, c in n if c == -1)
        return f"{pos} {op} {neg}"
    return f"{render(n)} {op} {-k}"


def _compare(op: str, a, b) -> bool:
    holds = _COMPARE[op](int.__int__(a) if isinstance(a, SymDim) else int(a),
                         int.__int__(b) if isinstance(b, SymDim) else int(b))
    if isinstance(a, Unguarded) or isinstance(b, Unguarded):
        return holds
    rel_op = op if holds else _NEGATE[op]
    # two sizes found different were kept apart: code for unequal sizes
    # serves equal ones too (each reads its own), so that is not a guard
    if rel_op == "!=" and isinstance(a, SymDim) and isinstance(b, SymDim):
        return holds
    rel = _relation(rel_op, a, b)
    if rel is not None and not _implied(rel_op, a, b):
        _record(rel)
    return holds


_HUGE = 1 << 62  # no size reaches this: a range check against it always holds


def _implied(op: str, a, b) -> bool:
    """Relations every size satisfies: within the range of an i64 (what an
    attribute's verifier checks), and, for a polynomial of symbols with
    positive coefficients, its least value with every symbol 2 (sizes 0 and
    1 are specialized): `s0 != 1`, `s0*s1 > 3`, `s0 + 1 >= 3`, ..."""
    d = _padd(_poly_of(a), _poly_of(b), -1)
    k = -d.pop((), 0)  # the relation is: d op k
    if not d:
        return True
    if abs(k) >= _HUGE:
        return (op in ("<", "<=", "!=") and k > 0) or (op in (">", ">=", "!=") and k < 0)
    atoms = {x for m in d for x, _ in m}
    if not all(x.isidentifier() and x[0] == "s" and x[1:].isdigit() for x in atoms):
        return False
    coeffs = list(d.values())
    if all(c > 0 for c in coeffs):
        least = sum(c * 2 ** sum(p for _, p in m) for m, c in d.items())
        return (op in (">=",) and least >= k) or (op in (">", "!=") and least > k)
    if all(c < 0 for c in coeffs):
        most = sum(c * 2 ** sum(p for _, p in m) for m, c in d.items())
        return (op in ("<=",) and most <= k) or (op in ("<", "!=") and most < k)
    return False


def always(op: str, a, b) -> bool:
    """Whether `a op b` holds for every size the symbols can take (sizes
    are at least 2: 0 and 1 are specialized), recording nothing: for a
    pass that must not guard the call's sizes (`s0 - 2 > 0` may not hold,
    so it is False; `s0*s1 > 0` is True)."""
    if not isinstance(a, SymDim) and not isinstance(b, SymDim):
        return _COMPARE[op](int(a), int(b))
    d = _padd(_poly_of(a), _poly_of(b), -1)
    if not {m for m in d if m}:  # (a constant difference: the relation is its value)
        return _COMPARE[op](d.get((), 0), 0)
    return _implied(op, a, b) and _COMPARE[op](hint(a), hint(b))


def _specialize(x: "SymDim") -> int:
    v = int.__int__(x)
    _record(f"{x.expr} == {v}")
    return v


def _arith(op: str, fn: Callable, a, b):
    if not isinstance(a, _INTS) or not isinstance(b, _INTS):
        return NotImplemented
    v = fn(int.__int__(a) if isinstance(a, SymDim) else int(a),
           int.__int__(b) if isinstance(b, SymDim) else int(b))
    if op == "+":
        return _from_poly(v, _padd(_poly_of(a), _poly_of(b)))
    if op == "-":
        return _from_poly(v, _padd(_poly_of(a), _poly_of(b), -1))
    if op == "*":
        return _from_poly(v, _pmul(_poly_of(a), _poly_of(b)))
    return _divide(v, a, b, op)


class SymDim(int):
    """A size: its value when compiling (`int`), and `expr`, its expression
    over the size symbols. See the module's docstring."""

    def __new__(cls, value: int, expr: str, poly: Poly | None = None):
        obj = int.__new__(cls, value)
        obj.expr = expr
        obj.poly = poly if poly is not None else _atom(expr)
        return obj

    def __repr__(self) -> str:
        return f"{self.expr}={int.__int__(self)}"

    def __reduce__(self):
        return (SymDim, (int.__int__(self), self.expr, self.poly))

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
    def __neg__(self): return _from_poly(-int.__int__(self), _padd({}, dict(self.poly), -1))
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


def prod_dims(shape) -> int:
    """The product of sizes (symbolic where one is)."""
    n = 1
    for d in shape:
        n = n * d
    return n


def symbolic_reshape(shape: tuple, size) -> tuple:
    """numpy's reshape of `size` elements to `shape` (one -1 allowed) for
    symbolic sizes: the -1 dim is size // the others' product, where that
    divides (a relation: the program serves the sizes it divides), numpy's
    error otherwise."""
    shape = tuple(shape)
    if sum(1 for n in shape if type(n) is int and n == -1) > 1:
        raise ValueError("can only specify one unknown dimension")
    known = prod_dims(n for n in shape if not (type(n) is int and n == -1))
    if any(type(n) is int and n == -1 for n in shape):
        if known == 0 or size % known != 0:
            raise ValueError(f"cannot reshape array of size {hint(size)} into shape "
                             f"{tuple(hint(n) for n in shape)}")
        return tuple(size // known if type(n) is int and n == -1 else n for n in shape)
    if known != size:
        raise ValueError(f"cannot reshape array of size {hint(size)} into shape "
                         f"{tuple(hint(n) for n in shape)}")
    return shape


def slice_indices(start, stop, step, n) -> tuple:
    """`slice(start, stop, step).indices(n)` for a size n that may be
    symbolic (each clamp a recorded decision); the bounds are ints or None."""
    if not isinstance(n, SymDim) and not any(isinstance(b, SymDim) for b in (start, stop, step)):
        return slice(start, stop, step).indices(n)
    step = 1 if step is None else int(step)  # (a symbolic step: specialized)
    if step == 0:
        raise ValueError("slice step cannot be zero")
    lower, upper = (0, n) if step > 0 else (-1, n - 1)

    def clamp(b, default):
        if b is None:
            return default
        if b < 0:
            b = b + n
            return lower if b < lower else b
        return upper if b > upper else b

    return clamp(start, lower if step < 0 else 0) if step > 0 else clamp(start, upper), \
        clamp(stop, upper) if step > 0 else clamp(stop, lower), step


def range_length(b, e, s: int):
    """len(range(b, e, s)), symbolic where the bounds are."""
    if not isinstance(b, SymDim) and not isinstance(e, SymDim):
        return len(range(b, e, s))
    n = (e - b + (s - 1)) // s if s > 0 else (b - e + (-s - 1)) // (-s)
    return n if n > 0 else 0


# ---- sizes as the user's code sees them ---------------------------------------------
# Inside the compiler a symbolic size is a SymDim, an int (xDSL and numpy
# take it as one). The user's code gets a SymSize instead, which is not an
# int: whatever Python or numpy does with it that has no symbolic form calls
# one of its methods (`__index__` for `range(n)` or `len`, `__hash__` for a
# dict lookup, `__float__`, `__format__`, ...), and each of those specializes
# the program to the size seen (records `s0 == 5`). Arithmetic stays
# symbolic; every comparison records the relation that held, between two
# symbols too (a branch in the user's code on `x.shape[0] == y.shape[0]`).

def _internal(o):
    if isinstance(o, SymSize):
        return o.sym
    if isinstance(o, np.integer):
        return int(o)
    return o


def _user(v):
    return SymSize(v) if isinstance(v, SymDim) else v


def _user_compare(op: str, a, b) -> bool:
    if isinstance(b, float) and not isinstance(b, bool):
        holds = _COMPARE[op](int.__int__(a), b)
        rel_op = op if holds else _NEGATE[op]
        _record(f"{a.expr} {rel_op} {b!r}")
        return holds
    holds = _COMPARE[op](int.__int__(a), int.__int__(b) if isinstance(b, SymDim) else int(b))
    rel_op = op if holds else _NEGATE[op]
    rel = _relation(rel_op, a, b)
    if rel is not None and not _implied(rel_op, a, b):
        _record(rel)
    return holds


class SymSize:
    """A symbolic size in the user's code (see above): `sym` is the SymDim."""

    __slots__ = ("sym",)

    def __init__(self, sym: SymDim):
        self.sym = sym

    def _arith(self, o, fn, reflected=False):
        o = _internal(o)
        if isinstance(o, bool) or not isinstance(o, int):
            return NotImplemented
        return _user(fn(o, self.sym) if reflected else fn(self.sym, o))

    def __add__(self, o): return self._arith(o, operator.add)
    def __radd__(self, o): return self._arith(o, operator.add, True)
    def __sub__(self, o): return self._arith(o, operator.sub)
    def __rsub__(self, o): return self._arith(o, operator.sub, True)
    def __mul__(self, o): return self._arith(o, operator.mul)
    def __rmul__(self, o): return self._arith(o, operator.mul, True)
    def __floordiv__(self, o): return self._arith(o, operator.floordiv)
    def __rfloordiv__(self, o): return self._arith(o, operator.floordiv, True)
    def __mod__(self, o): return self._arith(o, operator.mod)
    def __rmod__(self, o): return self._arith(o, operator.mod, True)
    def __neg__(self): return _user(-self.sym)
    def __pos__(self): return self

    def __abs__(self):
        return self if self >= 0 else -self

    def _cmp(self, op, o):
        o = _internal(o)
        if isinstance(o, bool) or not isinstance(o, (int, float)):
            return NotImplemented
        return _user_compare(op, self.sym, o)

    def __eq__(self, o): return self._cmp("==", o)
    def __ne__(self, o): return self._cmp("!=", o)
    def __lt__(self, o): return self._cmp("<", o)
    def __le__(self, o): return self._cmp("<=", o)
    def __gt__(self, o): return self._cmp(">", o)
    def __ge__(self, o): return self._cmp(">=", o)

    def __bool__(self):
        return _user_compare("!=", self.sym, 0)

    # no symbolic form: specialized to the value
    def _value(self) -> int:
        return _specialize(self.sym)

    def __index__(self): return self._value()
    def __int__(self): return self._value()
    def __float__(self): return float(self._value())
    def __complex__(self): return complex(self._value())
    def __hash__(self): return hash(self._value())
    def __format__(self, spec): return format(self._value(), spec)
    def __str__(self): return str(self._value())
    def __repr__(self): return repr(self._value())
    def __round__(self, n=None): return round(self._value(), n)
    def __trunc__(self): return self._value()
    def __floor__(self): return self._value()
    def __ceil__(self): return self._value()
    def __truediv__(self, o): return self._value() / _plain_operand(o)
    def __rtruediv__(self, o): return _plain_operand(o) / self._value()
    def __pow__(self, o, m=None): return pow(self._value(), _plain_operand(o), m)
    def __rpow__(self, o): return _plain_operand(o) ** self._value()
    def __and__(self, o): return self._value() & _plain_operand(o)
    def __rand__(self, o): return _plain_operand(o) & self._value()
    def __or__(self, o): return self._value() | _plain_operand(o)
    def __ror__(self, o): return _plain_operand(o) | self._value()
    def __xor__(self, o): return self._value() ^ _plain_operand(o)
    def __rxor__(self, o): return _plain_operand(o) ^ self._value()
    def __lshift__(self, o): return self._value() << _plain_operand(o)
    def __rlshift__(self, o): return _plain_operand(o) << self._value()
    def __rshift__(self, o): return self._value() >> _plain_operand(o)
    def __rrshift__(self, o): return _plain_operand(o) >> self._value()
    def __divmod__(self, o): return divmod(self._value(), _plain_operand(o))
    def __rdivmod__(self, o): return divmod(_plain_operand(o), self._value())
    def bit_length(self): return self._value().bit_length()
    def __reduce__(self): return (int, (int.__int__(self.sym),))

    @property
    def real(self): return self

    @property
    def imag(self): return 0


def _plain_operand(o):
    return o._value() if isinstance(o, SymSize) else o


def to_internal(x, _depth: int = 0):
    """The user's values with their SymSizes as the compiler's SymDims
    (inside tuples, lists, dicts and slices)."""
    if isinstance(x, SymSize):
        return x.sym
    if _depth > 8:
        return x
    t = type(x)
    if t is tuple or t is list:
        if not any(isinstance(e, (SymSize, tuple, list, slice, dict)) for e in x):
            return x
        return t(to_internal(e, _depth + 1) for e in x)
    if t is slice:
        if not any(isinstance(b, SymSize) for b in (x.start, x.stop, x.step)):
            return x
        return slice(to_internal(x.start), to_internal(x.stop), to_internal(x.step))
    if t is dict:
        return {k: to_internal(v, _depth + 1) for k, v in x.items()}
    return x


def to_user(x, _depth: int = 0):
    """The compiler's values as the user's code sees them: a SymDim as a
    SymSize (inside tuples and lists)."""
    if isinstance(x, SymDim):
        return SymSize(x)
    if _depth > 8:
        return x
    t = type(x)
    if (t is tuple or t is list) and any(isinstance(e, (SymDim, tuple, list)) for e in x):
        return t(to_user(e, _depth + 1) for e in x)
    return x


def specialized(x):
    """A size as the plain int it is, the program specialized to it (a
    size C code takes: `len()`)."""
    if isinstance(x, SymSize):
        return x._value()
    if isinstance(x, SymDim):
        return _specialize(x)
    return x
