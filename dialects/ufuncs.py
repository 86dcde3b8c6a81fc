"""The one table of the numpy ufuncs the compiler knows: what each is, how it
is computed at each level, what it costs and how exactly it is checked. Every
other list of ufunc names (capture's supported set, decompose's rewrites, the
loop level's generated set, the cost model, the testing op classes, the
surface table) is derived from it, and every table of rules keyed by ufunc
name (the VJP rules, the LLVM rules, the numpy backend) is checked against it
when its module is imported (`require`).

Columns, one row per ufunc (numpy's `ufunc.__name__`):

- `nin`, `nout`: numpy's arity (a test checks them against numpy).
- `exactness`: the op class of `lowering.testing.TOLERANCES`: "exact" (IEEE
  or numpy fix the result bit for bit) or "pointwise" (one libm-class
  function: a couple of ULPs between two libms).
- `cost`: "expensive" for a transcendental function or a division-like one
  (the divider: divide, reciprocal, sqrt, floor_divide, remainder, fmod),
  "cheap" otherwise. The scheduler's chain length (`schedule`) and the CPU
  backend's row cache read it.
- `recompute`: the cost class fusion (`lower-to-loop`) weighs a value's
  recomputation by. It is `cost` but for the division-like ufuncs, which
  fusion has always recomputed as cheap: counting divide and sqrt expensive
  there changes the kernels of layernorm and Black-Scholes (process replay),
  a change of its own to make and measure, not a side effect of this table.
- `gen`: which loops the loop level generates inline: "all", "float" (its
  integer loops run in numpy: numpy raises for negative integer powers and has
  its own 1/0 rules), or "no" (always a `loop.extern`).
- `grad`: "rule" (a VJP rule in `passes/autograd.py`), "zero" (its derivative
  is 0 wherever it has one), or "-" (no float result: nothing to differentiate).
- `tier`: "1" where OPS.md lists it in Tier 1, "-" for the ones beyond it.
- `float`, `int`, `bool` (fields `float_op`, `int_op`, `bool_op`): the
  upstream `arith`/`math` op `decompose` rewrites it to for float,
  signed-integer and bool operands where that op has numpy's exact meaning
  ("-": it stays `array.ufunc`). An op of more operands than the ufunc gets
  its operand repeated (`square`: x * x).
- `compare`: the `array.compare` predicate a comparison becomes.
- `fpe`: the floating-point error categories numpy's loops of the ufunc can
  raise (`np.errstate`'s: d divide, o over, u under, i invalid; "-" none),
  for float operands, then after a "/" those of its integer loops (none
  where there is no "/"): a superset of what numpy raises on this CPU
  (tests/dialects/test_fpe_facts.py probes numpy at special values). An
  unused op of a category the caller's errstate acts on is computed for its
  flags all the same (passes/keep_flags.py): numpy computes it and warns.

This module is data and a few helpers: it imports only the standard library
and xDSL (the layering contract of `dialects/`: xDSL, numpy and the standard
library)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from xdsl.dialects import arith, math
from xdsl.utils.exceptions import VerifyException

# name        in out exactness cost      recompute gen   grad tier float          int         bool       cmp fpe
_TABLE = """
add           2  1   exact     cheap     cheap     all   rule 1    arith.addf     arith.addi  arith.ori  -   io
subtract      2  1   exact     cheap     cheap     all   rule 1    arith.subf     arith.subi  -          -   io
multiply      2  1   exact     cheap     cheap     all   rule 1    arith.mulf     arith.muli  arith.andi -   iou
divide        2  1   exact     expensive cheap     all   rule 1    arith.divf     -           -          -   diou
floor_divide  2  1   exact     expensive cheap     all   zero 1    -              -           -          -   diou/do
remainder     2  1   exact     expensive cheap     all   rule 1    -              -           -          -   diou/d
fmod          2  1   exact     expensive cheap     all   rule 1    -              -           -          -   iu/d
power         2  1   pointwise expensive expensive float rule 1    math.powf      -           -          -   diou
float_power   2  1   pointwise expensive expensive no    rule 1    -              -           -          -   diou
negative      1  1   exact     cheap     cheap     all   rule 1    arith.negf     -           -          -   -
positive      1  1   exact     cheap     cheap     no    rule 1    -              -           -          -   -
absolute      1  1   exact     cheap     cheap     all   rule 1    math.absf      -           -          -   -
fabs          1  1   exact     cheap     cheap     no    rule 1    math.absf      -           -          -   -
sign          1  1   exact     cheap     cheap     all   zero 1    -              -           -          -   -
reciprocal    1  1   exact     expensive cheap     float rule 1    -              -           -          -   diou/di
square        1  1   exact     cheap     cheap     all   rule 1    arith.mulf     -           -          -   ou
sqrt          1  1   exact     expensive cheap     all   rule 1    math.sqrt      -           -          -   i
cbrt          1  1   pointwise expensive expensive all   rule 1    math.cbrt      -           -          -   u
exp           1  1   pointwise expensive expensive all   rule 1    math.exp       -           -          -   ou
exp2          1  1   pointwise expensive expensive all   rule 1    math.exp2      -           -          -   ou
expm1         1  1   pointwise expensive expensive all   rule 1    math.expm1     -           -          -   ou
log           1  1   pointwise expensive expensive all   rule 1    math.log       -           -          -   di
log2          1  1   pointwise expensive expensive all   rule 1    math.log2      -           -          -   di
log10         1  1   pointwise expensive expensive all   rule 1    math.log10     -           -          -   di
log1p         1  1   pointwise expensive expensive all   rule 1    math.log1p     -           -          -   diu
logaddexp     2  1   pointwise expensive expensive all   rule 1    -              -           -          -   iou
sin           1  1   pointwise expensive expensive all   rule 1    math.sin       -           -          -   iu
cos           1  1   pointwise expensive expensive all   rule 1    math.cos       -           -          -   iu
tan           1  1   pointwise expensive expensive all   rule 1    math.tan       -           -          -   iu
arcsin        1  1   pointwise expensive expensive all   rule 1    math.asin      -           -          -   iu
arccos        1  1   pointwise expensive expensive all   rule 1    math.acos      -           -          -   iu
arctan        1  1   pointwise expensive expensive all   rule 1    math.atan      -           -          -   u
arctan2       2  1   pointwise expensive expensive all   rule 1    math.atan2     -           -          -   iu
sinh          1  1   pointwise expensive expensive all   rule 1    math.sinh      -           -          -   ou
cosh          1  1   pointwise expensive expensive all   rule 1    math.cosh      -           -          -   o
tanh          1  1   pointwise expensive expensive all   rule 1    math.tanh      -           -          -   u
arcsinh       1  1   pointwise expensive expensive all   rule 1    math.asinh     -           -          -   u
arccosh       1  1   pointwise expensive expensive all   rule 1    math.acosh     -           -          -   i
arctanh       1  1   pointwise expensive expensive all   rule 1    math.atanh     -           -          -   diu
hypot         2  1   pointwise expensive expensive all   rule 1    -              -           -          -   ou
maximum       2  1   exact     cheap     cheap     all   rule 1    -              arith.maxsi arith.ori  -   -
minimum       2  1   exact     cheap     cheap     all   rule 1    -              arith.minsi arith.andi -   -
fmax          2  1   exact     cheap     cheap     all   rule 1    -              -           -          -   -
fmin          2  1   exact     cheap     cheap     all   rule 1    -              -           -          -   -
floor         1  1   exact     cheap     cheap     all   zero 1    math.floor     -           -          -   -
ceil          1  1   exact     cheap     cheap     all   zero 1    math.ceil      -           -          -   -
trunc         1  1   exact     cheap     cheap     all   zero 1    math.trunc     -           -          -   -
rint          1  1   exact     cheap     cheap     all   zero 1    math.roundeven -           -          -   -
copysign      2  1   exact     cheap     cheap     all   rule 1    math.copysign  -           -          -   -
greater       2  1   exact     cheap     cheap     no    -    1    -              -           -          gt  -
greater_equal 2  1   exact     cheap     cheap     no    -    1    -              -           -          ge  -
less          2  1   exact     cheap     cheap     no    -    1    -              -           -          lt  -
less_equal    2  1   exact     cheap     cheap     no    -    1    -              -           -          le  -
equal         2  1   exact     cheap     cheap     no    -    1    -              -           -          eq  -
not_equal     2  1   exact     cheap     cheap     no    -    1    -              -           -          ne  -
logical_and   2  1   exact     cheap     cheap     all   -    1    -              -           arith.andi -   -
logical_or    2  1   exact     cheap     cheap     all   -    1    -              -           arith.ori  -   -
logical_not   1  1   exact     cheap     cheap     all   -    1    -              -           -          -   -
logical_xor   2  1   exact     cheap     cheap     all   -    1    -              -           arith.xori -   -
isnan         1  1   exact     cheap     cheap     all   zero 1    -              -           -          -   -
isinf         1  1   exact     cheap     cheap     all   zero 1    -              -           -          -   -
isfinite      1  1   exact     cheap     cheap     all   zero 1    -              -           -          -   -
signbit       1  1   exact     cheap     cheap     all   zero 1    -              -           -          -   -
bitwise_and   2  1   exact     cheap     cheap     all   -    1    -              arith.andi  arith.andi -   -
bitwise_or    2  1   exact     cheap     cheap     all   -    1    -              arith.ori   arith.ori  -   -
bitwise_xor   2  1   exact     cheap     cheap     all   -    1    -              arith.xori  arith.xori -   -
invert        1  1   exact     cheap     cheap     all   -    1    -              -           -          -   -
left_shift    2  1   exact     cheap     cheap     all   -    1    -              -           -          -   -
right_shift   2  1   exact     cheap     cheap     all   -    1    -              -           -          -   -
logaddexp2    2  1   pointwise expensive expensive no    rule -    -              -           -          -   iou
conjugate     1  1   exact     cheap     cheap     no    rule -    -              -           -          -   -
deg2rad       1  1   exact     cheap     cheap     all   rule -    -              -           -          -   ou
rad2deg       1  1   exact     cheap     cheap     all   rule -    -              -           -          -   ou
degrees       1  1   exact     cheap     cheap     all   rule -    -              -           -          -   ou
radians       1  1   exact     cheap     cheap     all   rule -    -              -           -          -   ou
heaviside     2  1   exact     cheap     cheap     all   zero -    -              -           -          -   -
nextafter     2  1   exact     cheap     cheap     no    zero -    -              -           -          -   ou
ldexp         2  1   exact     cheap     cheap     all   rule -    -              -           -          -   ou
"""

# OPS.md's other spellings of a row's ufunc (the same numpy object: np.true_divide
# is np.divide); capture and the IR name the ufunc by its `__name__` only
ALIASES: dict[str, str] = {"true_divide": "divide", "mod": "remainder"}

EXACTNESS = ("exact", "pointwise")
COSTS = ("cheap", "expensive")
GEN = ("all", "float", "no")
GRAD = ("rule", "zero", None)
COMPARES = ("eq", "ne", "lt", "le", "gt", "ge")
# np.errstate's categories, in numpy's order, and their letters in `fpe`
FPE_CATEGORIES = ("divide", "over", "under", "invalid")
FPE_LETTERS = {"d": "divide", "o": "over", "u": "under", "i": "invalid"}


@dataclass(frozen=True)
class Ufunc:
    name: str
    nin: int
    nout: int
    exactness: str
    cost: str
    recompute: str
    gen: str
    grad: str | None
    tier: int | None
    float_op: str | None
    int_op: str | None
    bool_op: str | None
    compare: str | None
    fpe_float: frozenset[str] = frozenset()
    fpe_int: frozenset[str] = frozenset()

    @property
    def generated(self) -> bool:
        """The loop level generates some of its loops."""
        return self.gen != "no"

    @property
    def expensive(self) -> bool:
        return self.cost == "expensive"

    def fpe(self, integer: bool) -> frozenset[str]:
        """The errstate categories its float (integer) loops can raise."""
        return self.fpe_int if integer else self.fpe_float

    @property
    def aliases(self) -> tuple[str, ...]:
        return tuple(a for a, n in ALIASES.items() if n == self.name)


class UfuncTableError(Exception):
    """The table is malformed, or a table of rules disagrees with it (not an
    ImportError: an optional import's `except ImportError` must not hide it)."""


def _fpe(name: str, text: str | None) -> tuple[frozenset[str], frozenset[str]]:
    """The `fpe` column: (float categories, integer categories)."""
    parts = (text or "-").split("/")
    out = []
    for part in parts + ["-"] * (2 - len(parts)):
        bad = set(part) - set(FPE_LETTERS) - {"-"}
        if len(parts) > 2 or bad or (part != "-" and "-" in part):
            raise UfuncTableError(f"dialects/ufuncs.py: {name}: fpe is {text!r}, not letters "
                                  f"of {''.join(FPE_LETTERS)} (or -), optionally /integer's")
        out.append(frozenset(FPE_LETTERS[c] for c in part if c != "-"))
    return out[0], out[1]


def _parse(text: str) -> tuple[Ufunc, ...]:
    rows = []
    for line in text.strip().splitlines():
        f = [None if c == "-" else c for c in line.split()]
        if len(f) != 14:
            raise UfuncTableError(f"dialects/ufuncs.py: row {line!r} has {len(f)} columns, not 14")
        u = Ufunc(f[0], int(f[1]), int(f[2]), f[3], f[4], f[5], f[6], f[7],
                  None if f[8] is None else int(f[8]), *f[9:13], *_fpe(f[0], f[13]))
        for col, allowed in (("exactness", EXACTNESS), ("cost", COSTS),
                             ("recompute", COSTS), ("gen", GEN),
                             ("grad", GRAD), ("tier", (1, None)),
                             ("compare", (*COMPARES, None))):
            if getattr(u, col) not in allowed:
                raise UfuncTableError(f"dialects/ufuncs.py: {u.name}: {col} is "
                                      f"{getattr(u, col)!r}, not one of {allowed}")
        rows.append(u)
    return tuple(rows)


TABLE: tuple[Ufunc, ...] = _parse(_TABLE)
UFUNCS: dict[str, Ufunc] = {u.name: u for u in TABLE}


def lookup(name: str) -> Ufunc | None:
    """The row of a ufunc by its numpy name or an OPS.md alias."""
    return UFUNCS.get(ALIASES.get(name, name))


def names(where: Callable[[Ufunc], bool] = lambda u: True, table: Iterable[Ufunc] = TABLE,
          aliases: bool = False) -> list[str]:
    """The names of the rows `where` selects, in table order; with `aliases`,
    each row's OPS.md aliases follow its name."""
    out = []
    for u in table:
        if where(u):
            out.append(u.name)
            if aliases:
                out += u.aliases
    return out


# ---- the upstream ops of `decompose`, and back ------------------------------
OPERAND_CLASSES = ("float_op", "int_op", "bool_op")


def upstream_ops(table: Iterable[Ufunc] = TABLE) -> dict[str, str]:
    """upstream op name -> the ufunc it computes, the first row naming it in
    the float column, then the int column, then the bool column (`arith.ori`
    is bitwise_or: on bools too)."""
    out: dict[str, str] = {}
    for col in OPERAND_CLASSES:
        for u in table:
            op = getattr(u, col)
            if op is not None:
                out.setdefault(op, u.name)
    return out


UPSTREAM: dict[str, str] = upstream_ops()


_OP_CLASSES = {op.name: op for d in (arith.Arith, math.Math) for op in d.operations}


def upstream_class(op_name: str) -> type:
    """The xDSL class of an upstream op named in the table."""
    return _OP_CLASSES[op_name]


def check_table(table: tuple[Ufunc, ...]) -> None:
    """One row per ufunc; every rewrite names an xDSL op; the ufuncs one
    upstream op computes agree on their cost (an op has one cost)."""
    seen = set()
    for u in table:
        if u.name in seen:
            raise UfuncTableError(f"dialects/ufuncs.py: {u.name} has two rows")
        seen.add(u.name)
    ops = upstream_ops(table)
    unknown = [op for op in ops if op not in _OP_CLASSES]
    if unknown:
        raise UfuncTableError(f"dialects/ufuncs.py: no xDSL op named {', '.join(unknown)}")
    for op in ops:
        costs = {(u.cost, u.recompute) for u in table for c in OPERAND_CLASSES
                 if getattr(u, c) == op}
        if len(costs) != 1:
            raise UfuncTableError(f"dialects/ufuncs.py: the ufuncs {op} computes disagree "
                                  "on their cost")


check_table(TABLE)


# ufuncs whose integer loops raise a Python exception for some values, whatever
# `np.errstate` says: numpy's `power` of integers to a negative integer
# power (ValueError). A value of one is computed even where nothing reads it
# (`dialects.array.raises_on_values`, passes/keep_flags.py).
RAISES_ON_INTEGERS = frozenset({"power"})


def of_op(op) -> Ufunc | None:
    """The row of the ufunc an op computes: `array.ufunc`/`loop.ufunc` by its
    name, an upstream op by the table's rewrites (None for any other op)."""
    if op.name in ("array.ufunc", "loop.ufunc"):
        return UFUNCS.get(op.fn.data)
    name = UPSTREAM.get(op.name)
    return UFUNCS[name] if name is not None else None


def expensive_op(op) -> bool:
    """A transcendental or a division, by the `cost` of the ufunc the op
    computes. A math op of no ufunc (`math.fma`, of inlined dot products)
    counts too, as every math op but the rounding ones did before the table:
    not counting it changes the kernels of the MLP workloads (process replay)."""
    u = of_op(op)
    return u.expensive if u is not None else op.name.startswith("math.")


# ---- checking IR and tables of rules against this one ------------------------

def verify_call(op_name: str, fn: str, n_inputs: int) -> None:
    """The verifier of `array.ufunc` and `loop.ufunc`: `fn` is a row of the
    table and the op has its `nin` inputs."""
    u = UFUNCS.get(fn)
    if u is None:
        raise VerifyException(f"{op_name}: unknown ufunc {fn!r} (not in dialects/ufuncs.py)")
    if n_inputs != u.nin:
        raise VerifyException(f"{op_name}: {fn} takes {u.nin} input(s), got {n_inputs}")


def require(rules: Iterable[str], where: Callable[[Ufunc], bool], what: str,
            exact: bool = False, table: Iterable[Ufunc] = TABLE) -> None:
    """Every ufunc `where` selects has a rule in `rules` (a collection of
    ufunc names); with `exact`, `rules` has no other names either. Raises
    UfuncTableError naming the ufuncs (called at import of the rules' module,
    so that a table row without its rule fails early and says where)."""
    table = tuple(table)
    have = set(rules)
    want = set(names(where, table))
    missing = [n for n in names(where, table) if n not in have]
    if missing:
        raise UfuncTableError(f"{what}: no rule for {', '.join(missing)} "
                              "(dialects/ufuncs.py says there is one)")
    extra = sorted(have - want)
    if exact and extra:
        known = {u.name for u in table}
        why = ["not in dialects/ufuncs.py" if n not in known else
               "dialects/ufuncs.py does not select it" for n in extra]
        raise UfuncTableError(f"{what}: rules for " + ", ".join(
            f"{n} ({w})" for n, w in zip(extra, why)))


def require_upstream(rules: Iterable[str], what: str, table: Iterable[Ufunc] = TABLE) -> None:
    """Every upstream op the table's rewrites produce has a rule in `rules` (a
    collection of op names), or UfuncTableError names the ops."""
    have = set(rules)
    missing = [op for op in upstream_ops(table) if op not in have]
    if missing:
        raise UfuncTableError(f"{what}: no rule for {', '.join(missing)} "
                              "(decompose rewrites to it: dialects/ufuncs.py)")
