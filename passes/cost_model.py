"""The cost model that keeps numpy's routine where a generated kernel would
lose: for each shape class of an op that has both a generated kernel and a
library routine (BLAS, numpy's own loop), the time of either path, from a
table measured on the machine kind (`python -m lowering.calibrate`), and the
faster one chosen.

A shape class names an op, the generated kernel that can compute it and the
routine that can (`CLASSES`); eligibility (can the kernel compute this op at
all: its dtype, the static sizes its structure needs) stays with the
lowering's predicates; this module only decides between two paths that both
give numpy's answer. Each path's time is a line in the work it does:

    t = overhead + bytes * ns_per_byte + flops * ns_per_flop + rows * ns_per_row   (µs, ns)

with `bytes` the memory the path moves (a product fused into its consumer
never writes its output; a product whose left operand comes straight from
the kernel that computes it never reads it back), `flops` its arithmetic and
`rows` the inner loops it runs (a matmul's output rows, a column reduction's
input rows: numpy's per-row cost, a kernel's per-row setup). The
calibration fits the four coefficients of each (class, path) to timed
runs of both paths on a grid of shapes (non-negative least squares); the
tables ship in `cost_tables/`, one per machine kind it was measured on
(`<cpu>-<cores>c-<vector bits>bit.json`): a process takes the one of its
own machine kind, else the nearest (`nearest_machine`), and a calibrated
one replaces it (`LOWERING_COST_TABLE`, or the cache directory's
`cost_table.json`, which `python -m lowering.calibrate` writes). A table
measured on another CPU can be wrong by 2x about its own crossovers (a
float32 `A.T @ (A @ x)` at 2000x600: the one pass 2x faster than BLAS on
one CPU, 2x slower on another): hence one per kind. A table measured
before a class was added to the model has no rates for it: that class keeps
its generated path (the compiler's choice before the class existed) until
`python -m lowering.calibrate --only CLASS` measures it on that kind.

The table in use is part of every compiled program's key (`digest`): a
program compiled under one table is never reused under another."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

SHIPPED_DIR = Path(__file__).with_name("cost_tables")
# the table `shipped()` gives without a machine (tests that pin one table)
DEFAULT_MACHINE = "rocketlake-2c-512bit"
PATHS = ("generated", "library")


@dataclass(frozen=True)
class ShapeClass:
    """An op's shape class: what its generated kernel is, what its library
    routine is, and how the measured work of each path is counted."""

    name: str
    generated: str  # the kernel that computes it (for reports)
    library: str  # the routine that computes it otherwise
    about: str
    # contexts of the op that change what a path costs, each with rates of
    # its own (a product whose operand or output another kernel fuses with)
    variants: tuple[str, ...] = ("plain",)

    def keys(self) -> list[str]:
        return [f"{self.name}/{v}" for v in self.variants]


CLASSES: dict[str, ShapeClass] = {c.name: c for c in (
    ShapeClass("matmul-narrow", "narrow matmul kernel (N dot products per row in one pass)",
               "BLAS gemm/gemv",
               "(M, K) @ (K, N), float, N <= 16 columns, K > 16: the MLP's `h @ W2`; "
               "fused: A made by a pointwise kernel (kept: and stored for another use)",
               ("plain", "fused", "fused-kept")),
    ShapeClass("matmul-short", "short matmul inlined into its consumer (K products per element)",
               "BLAS gemm",
               "(M, K) @ (K, N), float, K <= 16: the MLP backward's `dlogits @ W2.T`; "
               "fused: every consumer pointwise (the product never stored)",
               ("plain", "fused")),
    ShapeClass("matmul-shared-rows",
               "one ordered pass over the matrix's rows (the products of each row, then the "
               "row into the transposed product)",
               "BLAS gemv/gemm",
               "(K, M) @ (M, 1) = A.T @ v, or (1, M) @ (M, K) = v @ A, float, where v's "
               "elements are computed from products by A's rows (A @ W, W narrow): "
               "logistic regression's `X.T @ (sigmoid(X @ w) - y)`, atax's "
               "`A.T @ (A @ x)`, `(A @ x) @ A`; streamed: A bigger than a last-level "
               "cache's share (each pass from memory)",
               ("plain", "streamed")),
    ShapeClass("column-reduction", "strided row kernel (each output a column walk)",
               "numpy's reduction (row after row into the output)",
               "a sum/prod/max/min over leading axes that keeps a long last axis and that "
               "the loop level does not accumulate row by row (a changed dtype, other axes)"),
    ShapeClass("column-any", "strided row kernel (each output a column walk)",
               "numpy's any/all (row after row into the output)",
               "any/all over leading axes that keeps a long last axis"),
    ShapeClass("power", "vectorized pow fused into its kernel", "numpy's power loop",
               "x ** y of floats by an exponent `strength-reduce` leaves (not 2, 3, 4, "
               "+-0.5, +-1.5, -2): numpy's own float loops are SIMD pow on some CPUs "
               "(AVX-512 builds), 1.5-3x faster per element than the generated one; "
               "per element of the result, the generated path split over the threads "
               "its kernel would take",
               ("float32", "float64")),
)}


@dataclass(frozen=True)
class Rate:
    """One path's time for a class: overhead (µs) plus ns per byte moved,
    per flop and per row."""

    overhead_us: float
    ns_per_byte: float
    ns_per_flop: float
    ns_per_row: float

    def time_us(self, nbytes: float, flops: float, rows: float) -> float:
        return self.overhead_us + (nbytes * self.ns_per_byte + flops * self.ns_per_flop
                                   + rows * self.ns_per_row) / 1000.0


@dataclass(frozen=True)
class Work:
    """What one op's path costs in the model's terms: bytes each path moves,
    the flops both do, the rows both run (or, `generated_rows`, the
    generated path its own count: a kernel that runs scalar work per row)."""

    generated_bytes: float
    library_bytes: float
    flops: float
    rows: float
    variant: str = "plain"
    generated_rows: float | None = None
    # the generated path's flops per thread, where its kernel splits them
    # over threads the library's one-thread loop does not have
    generated_flops: float | None = None

    def bytes(self, path: str) -> float:
        return self.generated_bytes if path == "generated" else self.library_bytes

    def flops_of(self, path: str) -> float:
        if path == "generated" and self.generated_flops is not None:
            return self.generated_flops
        return self.flops

    def rows_of(self, path: str) -> float:
        if path == "generated" and self.generated_rows is not None:
            return self.generated_rows
        return self.rows


@dataclass(frozen=True)
class Choice:
    """The path chosen for one op, and why: both times as the table predicts
    them."""

    shape_class: str
    variant: str
    path: str  # "generated" or "library"
    generated_us: float
    library_us: float
    forced: bool = False
    unmeasured: bool = False  # the table has no rates for the class: generated

    def reason(self) -> str:
        c = CLASSES[self.shape_class]
        won = c.generated if self.path == "generated" else c.library
        v = "" if self.variant == "plain" else f" ({self.variant})"
        if self.forced:
            return f"{self.shape_class}{v}: {won} (forced)"
        if self.unmeasured:
            return (f"{self.shape_class}{v}: {won} — cost table {active().machine} has no rates "
                    f"for the class (`python -m lowering.calibrate --only {self.shape_class}` "
                    "measures them)")
        return (f"{self.shape_class}{v}: {won} — predicted {_us(self.generated_us)} generated vs "
                f"{_us(self.library_us)} {c.library} (cost table {active().machine})")


def _us(t: float) -> str:
    return f"{t:.1f} µs" if t < 1000 else f"{t / 1000:.2f} ms"


@dataclass(frozen=True)
class CostTable:
    """Per (class, path) the fitted rate; `machine` and `source` say where
    it was measured and how."""

    machine: str
    source: str
    rates: Mapping[str, Mapping[str, Rate]]
    digest: str = field(default="", compare=False)

    def __post_init__(self):
        # (a class the table has no rate for at all was added to the model
        # after the table was measured: `choose` keeps its generated path)
        missing = [f"{k}:{p}" for c in CLASSES.values() if self.measured(c.name)
                   for k in c.keys() for p in PATHS if p not in self.rates.get(k, {})]
        if missing:
            raise ValueError(f"cost table ({self.source}): no rate for {', '.join(missing)}")
        if not self.digest:
            object.__setattr__(self, "digest", hashlib.sha256(self.text().encode()).hexdigest()[:16])

    def measured(self, shape_class: str) -> bool:
        """Whether the table has rates for the class (a table measured
        before the class was added to the model has none)."""
        return any(k in self.rates for k in CLASSES[shape_class].keys())

    def choose(self, shape_class: str, work: Work) -> Choice:
        forced = _forced.get(shape_class) if _forced else None
        if not self.measured(shape_class):
            nan = float("nan")
            return Choice(shape_class, work.variant, forced or "generated", nan, nan,
                          forced is not None, unmeasured=forced is None)
        r = self.rates[f"{shape_class}/{work.variant}"]
        g = r["generated"].time_us(work.generated_bytes, work.flops_of("generated"),
                                   work.rows_of("generated"))
        lib = r["library"].time_us(work.library_bytes, work.flops, work.rows)
        if forced is not None:
            return Choice(shape_class, work.variant, forced, g, lib, True)
        return Choice(shape_class, work.variant, "generated" if g <= lib else "library", g, lib)

    def to_json(self) -> dict:
        return {"machine": self.machine, "source": self.source,
                "rates": {c: {p: [r.overhead_us, r.ns_per_byte, r.ns_per_flop, r.ns_per_row]
                              for p, r in sorted(ps.items())}
                          for c, ps in sorted(self.rates.items())}}

    def text(self) -> str:
        return json.dumps(self.to_json(), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, data: dict, source: str) -> CostTable:
        try:
            rates = {c: {p: Rate(*map(float, v)) for p, v in ps.items()}
                     for c, ps in data["rates"].items()}
            return cls(str(data["machine"]), str(data.get("source", source)), rates)
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"cost table {source}: malformed ({e!r})") from None

    @classmethod
    def load(cls, path: Path) -> CostTable:
        return cls.from_json(json.loads(path.read_text()), str(path))


# ---- the table in use ----------------------------------------------------------

_state = threading.local()
_default: CostTable | None = None
_default_loader: Callable[[], CostTable] | None = None
_forced: dict[str, str] = {}


def shipped_machines() -> list[str]:
    """The machine kinds a table ships for."""
    return sorted(p.stem for p in SHIPPED_DIR.glob("*.json"))


def _kind(machine: str) -> tuple[str, str, str]:
    """(cpu, cores, vector bits) of a machine name `<cpu>-<n>c-<bits>bit`."""
    parts = machine.rsplit("-", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else (machine, "", "")


def nearest_machine(machine: str, known: list[str]) -> str:
    """The kind among `known` whose table best stands in for `machine`'s:
    the same one; else the same CPU; else the same vector width (the
    generated kernels' speed), then the same core count; ties to
    DEFAULT_MACHINE, then by name."""
    cpu, cores, bits = _kind(machine)

    def score(k: str) -> tuple:
        c, n, b = _kind(k)
        return (k == machine, c == cpu, b == bits, n == cores, k == DEFAULT_MACHINE)

    return sorted(known, key=lambda k: (tuple(not x for x in score(k)), k))[0]


def shipped_path(machine: str | None = None) -> Path:
    """Where the shipped table for `machine`'s kind lies (the nearest kind's
    where none was measured on it); None: DEFAULT_MACHINE's."""
    known = shipped_machines()
    name = nearest_machine(machine or DEFAULT_MACHINE, known)
    return SHIPPED_DIR / f"{name}.json"


def shipped(machine: str | None = None) -> CostTable:
    return CostTable.load(shipped_path(machine))


def set_default_loader(loader: Callable[[], CostTable] | None) -> None:
    """Who finds the process's table (the compiler's entry points: a
    calibrated table where the user has one); None: the shipped one."""
    global _default, _default_loader
    _default_loader, _default = loader, None


def active() -> CostTable:
    """The table decisions use now: `use`'s in this thread, else the process's."""
    t = getattr(_state, "table", None)
    if t is not None:
        return t
    global _default
    if _default is None:
        _default = (_default_loader or shipped)()
    return _default


@contextmanager
def use(table: CostTable) -> Iterator[CostTable]:
    """Decide with `table` in this thread (tests; the calibration)."""
    old = getattr(_state, "table", None)
    _state.table = table
    try:
        yield table
    finally:
        _state.table = old


@contextmanager
def forced(paths: Mapping[str, str]) -> Iterator[None]:
    """Take `paths[class]` for those classes whatever the table says (the
    calibration times each path this way). Process-wide; part of `digest`."""
    bad = {c: p for c, p in paths.items() if c not in CLASSES or p not in PATHS}
    if bad:
        raise ValueError(f"forced paths: unknown classes or paths {bad}")
    old = dict(_forced)
    _forced.update(paths)
    try:
        yield
    finally:
        _forced.clear()
        _forced.update(old)


def digest() -> str:
    """What compiled programs depend on: the table in use and any forced path."""
    d = active().digest
    return d + "".join(f";{c}={p}" for c, p in sorted(_forced.items()))


def choose(shape_class: str, work: Work) -> Choice:
    return active().choose(shape_class, work)
