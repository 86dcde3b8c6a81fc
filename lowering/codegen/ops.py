"""The ops-handler protocol: the one interface through which the scalar body
of a kernel is emitted, whatever the backend.

A kernel body is a few structural ops (`loop.map`, `loop.reduce`, loads,
stores, `loop.index`), which each backend walks in its own iteration model
(SIMD lanes, numpy axes, Triton blocks), and scalar ops between them: the
op table's upstream `arith`/`math` ops, `loop.ufunc` by numpy name,
`loop.const`, `loop.cast`, compares, selects and indices used as data.
`emit` is the one walker of the scalar ops: it reads each op's attributes and
dispatches it to a handler, an implementation of `ScalarOps` whose values
are its backend's own (llvmlite IR values for the LLVM emitter, arrays for
the numpy interpreter, text for a source emitter). Every backend thus
covers the same ops with the same meaning, and a new backend is one more
subclass.

An implementation gives two rule tables, keyed as the op table
(`dialects/ufuncs.py`) keys them, and a method for each op with attributes
of its own:

- `UFUNCS`: numpy name -> rule(h, args, input types, result type), one per
  ufunc whose loops the loop level generates (the table's `gen` column);
- `UPSTREAM`: op name -> rule(h, args, result type), one per upstream op
  `decompose` rewrites a ufunc to, and the ones the passes emit of their own
  (`PASS_UPSTREAM`);
- `constant`, `cast`, `cmpf`, `cmpi`, `select`, `index_cast`, `affine_apply`.

Defining a subclass checks it (`check_handler`): a rule missing from either
table, a rule for an op no kernel has, or a method left abstract raises
`UfuncTableError` when the implementation's module is imported."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from xdsl.ir import Attribute, Operation

from dialects import ufuncs as U

V = TypeVar("V")

UfuncRule = Callable[[Any, list, list, Attribute], Any]  # (handler, args, input types, result type)
UpstreamRule = Callable[[Any, list, Attribute], Any]  # (handler, args, result type)

# arith.cmpf's and arith.cmpi's predicate attributes, by number (MLIR's order)
CMPF_PREDICATES = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt",
                   "uge", "ult", "ule", "une", "uno", "true")
CMPI_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")

# upstream ops in kernel bodies that are no ufunc's rewrite: lower-to-loop's
# inlined dot products accumulate with math.fma
PASS_UPSTREAM = ("math.fma",)


def upstream_names(table: Iterable[U.Ufunc] = U.TABLE) -> list[str]:
    """Every upstream op a kernel body may hold, so every op `UPSTREAM` rules."""
    return [*U.upstream_ops(table), *PASS_UPSTREAM]


class ScalarOps(ABC, Generic[V]):
    """The scalar meaning of a kernel body's ops in one backend's values.

    An instance is the backend's context for one op (the LLVM emitter's
    builder and vector width, the interpreter's depth of numpy axes); `emit`
    calls one of its methods per op."""

    backend: ClassVar[str]  # names the implementation in errors
    UFUNCS: ClassVar[Mapping[str, UfuncRule]]
    UPSTREAM: ClassVar[Mapping[str, UpstreamRule]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_handler(cls)

    def ufunc(self, fn: str, args: list[V], in_types: list[Attribute], rt: Attribute) -> V:
        """`loop.ufunc` `fn`: numpy's meaning for the operands' types."""
        return self.UFUNCS[fn](self, args, in_types, rt)

    def upstream(self, name: str, args: list[V], rt: Attribute) -> V:
        """An upstream `arith`/`math` op of no attributes, by its name."""
        return self.UPSTREAM[name](self, args, rt)

    @abstractmethod
    def constant(self, text: str, rt: Attribute) -> V:
        """`loop.const`: `text` as `array.constant` spells it, of type rt."""

    @abstractmethod
    def cast(self, x: V, src: Attribute, dst: Attribute) -> V:
        """`loop.cast`: numpy's astype (unsafe casting) from src to dst."""

    @abstractmethod
    def cmpf(self, predicate: str, a: V, b: V) -> V:
        """`arith.cmpf` by predicate name (`CMPF_PREDICATES`): ordered ones
        are false on NaN, unordered ones true."""

    @abstractmethod
    def cmpi(self, predicate: str, a: V, b: V) -> V:
        """`arith.cmpi` by predicate name (`CMPI_PREDICATES`)."""

    @abstractmethod
    def select(self, cond: V, a: V, b: V) -> V:
        """`arith.select`: a where cond, else b."""

    @abstractmethod
    def index_cast(self, op: Operation, args: list[V]) -> V:
        """`arith.index_cast`: an index (a dim of the iteration) used as data."""

    @abstractmethod
    def affine_apply(self, op: Operation, args: list[V]) -> V:
        """`affine.apply`: its map's one result at the operands, as data."""


# the ops of attributes of their own: how `emit` reads them
_OP_RULES: dict[str, Callable[[ScalarOps, Any, list], Any]] = {
    "loop.const": lambda h, op, a: h.constant(op.value.data, op.result.type),
    "loop.cast": lambda h, op, a: h.cast(a[0], op.input.type, op.result.type),
    "loop.ufunc": lambda h, op, a: h.ufunc(op.fn.data, a, [o.type for o in op.inputs],
                                           op.result.type),
    "arith.select": lambda h, op, a: h.select(*a),
    "arith.cmpf": lambda h, op, a: h.cmpf(CMPF_PREDICATES[op.predicate.value.data], *a),
    "arith.cmpi": lambda h, op, a: h.cmpi(CMPI_PREDICATES[op.predicate.value.data], *a),
    "arith.index_cast": lambda h, op, a: h.index_cast(op, a),
    "affine.apply": lambda h, op, a: h.affine_apply(op, a),
}


def emit(h: ScalarOps[V], op: Operation, args: Sequence[V]) -> V:
    """The value of one scalar op of a kernel body in h's terms; `args` are
    the values of its operands, in order."""
    rule = _OP_RULES.get(op.name)
    if rule is not None:
        return rule(h, op, list(args))
    if op.name in h.UPSTREAM:
        return h.upstream(op.name, list(args), op.results[0].type)
    raise NotImplementedError(f"{h.backend}: no rule for {op.name}")


# ---- completeness: every implementation covers the same ops ------------------

def abstract_methods(cls: type) -> list[str]:
    """The methods cls leaves abstract (computed here: ABCMeta sets
    `__abstractmethods__` only after `__init_subclass__` has run)."""
    return sorted(n for n in dir(cls)
                  if getattr(getattr(cls, n, None), "__isabstractmethod__", False))


def check_handler(cls: type, table: Iterable[U.Ufunc] = U.TABLE) -> None:
    """cls implements every method, rules every generated ufunc and every
    upstream op of `table`, and rules nothing else; else UfuncTableError
    naming what is missing or extra."""
    table = tuple(table)
    what = f"{cls.__module__}.{cls.__qualname__}"
    missing = abstract_methods(cls)
    if missing:
        raise U.UfuncTableError(f"{what}: no method {', '.join(missing)} (lowering/codegen/ops.py)")
    U.require(cls.UFUNCS, lambda u: u.generated, f"{what}.UFUNCS", exact=True, table=table)
    want = upstream_names(table)
    missing = [op for op in want if op not in cls.UPSTREAM]
    if missing:
        raise U.UfuncTableError(f"{what}.UPSTREAM: no rule for {', '.join(missing)} "
                                "(decompose or the passes emit it: dialects/ufuncs.py)")
    extra = sorted(set(cls.UPSTREAM) - set(want))
    if extra:
        raise U.UfuncTableError(f"{what}.UPSTREAM: rules for {', '.join(extra)}, which no "
                                "kernel holds (not in dialects/ufuncs.py nor PASS_UPSTREAM)")
