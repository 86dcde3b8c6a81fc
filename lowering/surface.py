"""The supported-surface table: which parts of the numpy surface that OPS.md
asks for are captured into a graph and which graph-break to eager numpy.

    python -m lowering.surface > docs/SURFACE.md

Functions, ufuncs and ufunc methods are looked up in capture's rule tables
(`registry.FUNCTIONS`, `registry.UFUNC_METHODS`, `rules.ufuncs.SUPPORTED_UFUNCS`):
a name with a rule is captured, one without graph-breaks. Syntax has no table
(operators, indexing, attributes, keyword forms), so each such row is a probe:
a one-line program traced by `lowering.explain`, captured when it records no
graph break. The Tier 1/Tier 2 lists below are OPS.md's, as data (the Tier 1
ufuncs are the op table's, dialects/ufuncs.py)."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dialects import ufuncs as U

# ---- OPS.md, as data ---------------------------------------------------------------
# An entry is a function/ufunc name (dotted names under `np.`), "ufunc.method"
# for ufunc methods, or a probe: (label, python statements ending in `return`).
# Probe variables: x, y f32[3,4]; a f32[3,4], b f32[4,5]; v f32[4]; i, j i64[3,4]
# (values 1..5); p, q bool[3,4]; k i64[3] (an index array).

Probe = tuple[str, str]

TIER1: list[tuple[str, list[str | Probe]]] = [
    ("Operators", [
        ("x + y", "return x + y"), ("x - y", "return x - y"), ("x * y", "return x * y"),
        ("x / y", "return x / y"), ("x // y", "return x // y"), ("x % y", "return x % y"),
        ("x ** y", "return x ** y"), ("x ** 3", "return x ** 3"), ("a @ b", "return a @ b"),
        ("-x", "return -x"), ("abs(x)", "return abs(x)"),
        ("x < y", "return x < y"), ("x <= y", "return x <= y"), ("x > y", "return x > y"),
        ("x >= y", "return x >= y"), ("x == y", "return x == y"), ("x != y", "return x != y"),
        ("p & q", "return p & q"), ("p | q", "return p | q"), ("p ^ q", "return p ^ q"),
        ("~p", "return ~p"), ("i & j", "return i & j"), ("i | j", "return i | j"),
        ("i ^ j", "return i ^ j"), ("~i", "return ~i"),
        ("x += y", "x += y\n    return x"), ("x -= y", "x -= y\n    return x"),
        ("x *= y", "x *= y\n    return x"), ("x /= y", "x /= y\n    return x"),
        ("x //= y", "x //= y\n    return x"), ("x %= y", "x %= y\n    return x"),
        ("x **= 2", "x **= 2\n    return x"), ("i &= j", "i &= j\n    return i"),
        ("i |= j", "i |= j\n    return i"), ("i ^= j", "i ^= j\n    return i"),
        ("x * 2.0 (f32 stays f32)", "return x * 2.0"),
    ]),
    ("Ufuncs (call form)", U.names(lambda u: u.tier == 1, aliases=True) + [
        ("np.add(x, y, out=x)", "np.add(x, y, out=x)\n    return x"),
        ("np.multiply(x, y, dtype=np.float64)", "return np.multiply(x, y, dtype=np.float64)"),
    ]),
    ("Reductions", "sum prod mean var std max min amax amin argmax argmin all any".split() + [
        "add.reduce", "multiply.reduce", "maximum.reduce", "minimum.reduce",
        ("x.sum(axis=(0, 1), keepdims=True)", "return x.sum(axis=(0, 1), keepdims=True)"),
        ("x.std(ddof=1)", "return x.std(ddof=1)"),
        ("np.sum(x, dtype=np.float64)", "return np.sum(x, dtype=np.float64)"),
        ("x.max(axis=-1)", "return x.max(axis=-1)"),
        ("logsumexp", "m = x.max(axis=1, keepdims=True)\n"
                      "    return m + np.log(np.exp(x - m).sum(axis=1, keepdims=True))"),
    ]),
    ("Linear algebra", "matmul dot vdot inner outer tensordot einsum trace".split() + [
        ("a @ b.T (batched: a[None] @ b)", "return a[None] @ b"),
    ]),
    ("Shapes and views", """reshape ravel transpose swapaxes moveaxis expand_dims squeeze
        broadcast_to broadcast_arrays concatenate stack hstack vstack split array_split flip
        roll tile repeat pad tril triu diag diagonal atleast_1d atleast_2d""".split() + [
        ("x.reshape(-1, 2)", "return x.reshape(-1, 2)"), ("x.flatten()", "return x.flatten()"),
        ("x.T", "return x.T"),
        ("np.pad(x, 1, mode='edge')", "return np.pad(x, 1, mode='edge')"),
        ("np.pad(x, 1, mode='reflect')", "return np.pad(x, 1, mode='reflect')"),
    ]),
    ("Indexing", [
        ("x[1:3, ::2]", "return x[1:3, ::2]"), ("x[::-1]", "return x[::-1]"),
        ("x[None, :, np.newaxis]", "return x[None, :, np.newaxis]"),
        ("x[..., 1]", "return x[..., 1]"), ("x[1]", "return x[1]"),
        ("x[k] (gather)", "return x[k]"), ("x[:, k]", "return x[:, k]"),
        "take", "take_along_axis",
        ("x[1:3] = y[1:3]", "x[1:3] = y[1:3]\n    return x"),
        ("x[::-1] = y", "x[::-1] = y\n    return x"),
        ("x[k] = 0.0 (scatter)", "x[k] = 0.0\n    return x"),
        "add.at",
    ]),
    ("Selection and clipping", ["where", "clip",
                                ("np.maximum(x, 0.0)", "return np.maximum(x, 0.0)"),
                                "nan_to_num", "select"]),
    ("Creation", """zeros ones full empty zeros_like ones_like full_like empty_like arange
        linspace eye identity asarray copy""".split() + [
        ("x.astype(np.int32)", "return x.astype(np.int32)"),
        ("np.zeros((3, 4)) + x", "return np.zeros((3, 4)) + x"),
    ]),
    ("Scans", ["cumsum", "cumprod", ("np.cumsum(x, axis=0)", "return np.cumsum(x, axis=0)")]),
    ("Attributes", [
        ("x.shape", "return x.shape"), ("x.ndim", "return x.ndim"),
        ("x.dtype", "return x.dtype"), ("x.size", "return x.size"),
        ("x.itemsize", "return x.itemsize"), ("len(x)", "return len(x)"),
    ]),
]

TIER2: list[tuple[str, list[str | Probe]]] = [
    ("Tier 2", """sort argsort searchsorted histogram linalg.norm linalg.solve linalg.inv
        linalg.cholesky lib.stride_tricks.sliding_window_view convolve fft.fft""".split() + [
        # the rest of the routines with static result shapes (`array.routine`)
        *"""partition argpartition linalg.det linalg.slogdet linalg.qr linalg.svd linalg.eigh
        linalg.eigvalsh linalg.lstsq linalg.pinv linalg.matrix_rank fft.irfft fft.irfft2
        fft.irfftn fft.hfft""".split(),
        ("a.argsort(axis=0)", "return a.argsort(axis=0)"),
        ("np.linalg.svd(a) (SVDResult)", "return np.linalg.svd(a, full_matrices=False)"),
        ("np.einsum('ii->i', a[:, :3]) (diagonal)", "return np.einsum('ii->i', a[:, :3])"),
        ("np.einsum('ij,jj->i', a, b[:, :4])", "return np.einsum('ij,jj->i', a, b[:, :4])"),
        ("np.fft.rfft(x) (complex result)", "return np.fft.rfft(x)"),
    ]),
]

ALWAYS_BREAK: list[Probe] = [
    ("x[x > 0] (boolean mask)", "return x[x > 0]"), ("np.nonzero(x)", "return np.nonzero(x)"),
    ("np.argwhere(x)", "return np.argwhere(x)"), ("np.unique(x)", "return np.unique(x)"),
    ("np.where(p) (one argument)", "return np.where(p)"),
    ("if x.sum() > 0:", "if x.sum() > 0:\n        return x\n    return -x"),
]


# ---- looking things up ------------------------------------------------------------

@dataclass
class Row:
    label: str
    status: str  # "captured" | "graph break" | "error" (capture crashed: a bug)
    where: str  # the rule's file, "probe", or the reason for a break

    @property
    def captured(self) -> bool:
        return self.status == "captured"


def _tables():
    from .capture import registry
    from .capture.rules.ufuncs import SUPPORTED_UFUNCS

    registry._load_rules()
    return registry.FUNCTIONS, registry.UFUNC_METHODS, SUPPORTED_UFUNCS


def _rule_file(impl: Callable) -> str:
    mod = getattr(impl, "__module__", "") or ""
    return mod.replace("lowering.capture.", "capture/").replace(".", "/") + ".py"


def _np_attr(name: str):
    obj = np
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def lookup(name: str) -> Row:
    functions, methods, ufuncs = _tables()
    if "." in name and isinstance(_np_attr(name.split(".")[0]), np.ufunc):
        uf, method = name.split(".")
        ok = method in methods and _np_attr(uf).__name__ in ufuncs
        return _table_row(f"np.{name}", methods[method] if ok else None)
    obj = _np_attr(name)
    if isinstance(obj, np.ufunc):
        if obj in functions:  # ufuncs with a rule of their own (matmul)
            return _table_row(f"np.{name}", functions[obj])
        ok = obj.__name__ in ufuncs and "__call__" in methods
        return _table_row(f"np.{name}", methods["__call__"] if ok else None)
    return _table_row(f"np.{name}", functions.get(obj) if obj is not None else None)


def _table_row(label: str, impl: Callable | None) -> Row:
    if impl is None:
        return Row(label, "graph break", "no rule")
    return Row(label, "captured", _rule_file(impl))


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "x": rng.standard_normal((3, 4), dtype=np.float32) + 2,
        "y": rng.standard_normal((3, 4), dtype=np.float32) + 3,
        "a": rng.standard_normal((3, 4), dtype=np.float32),
        "b": rng.standard_normal((4, 5), dtype=np.float32),
        "v": rng.standard_normal(4, dtype=np.float32),
        "i": rng.integers(1, 6, (3, 4)), "j": rng.integers(1, 6, (3, 4)),
        "p": rng.random((3, 4)) < 0.5, "q": rng.random((3, 4)) < 0.5,
        "k": np.array([2, 0, 1]),
    }


def probe(label: str, body: str) -> Row:
    from .explain import explain

    names = list(_inputs())
    src = f"def probe({', '.join(names)}):\n    {body}\n"
    env: dict = {"np": np}
    exec(compile(src, f"<probe {label}>", "exec"), env)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = explain(env["probe"])(*_inputs().values())
    except Exception as e:  # a crash in capture: shown as such, never as captured
        msg = " ".join(str(e).split())
        return Row(f"`{label}`", "error", f"{type(e).__name__}: {msg[:100]}")
    if report.graph_count == 0:
        return Row(f"`{label}`", "graph break", "the whole function ran eagerly")
    if report.graph_break_count:
        return Row(f"`{label}`", "graph break", report.breaks[0].reason)
    return Row(f"`{label}`", "captured", "probe")


def rows(entries: list[str | Probe]) -> list[Row]:
    return [lookup(e) if isinstance(e, str) else probe(*e) for e in entries]


# ---- the table ---------------------------------------------------------------------

def _table(rs: list[Row], expected: str = "captured") -> list[str]:
    """Rows whose status is not the expected one are in bold."""
    out = ["| numpy | status | rule / reason |", "|---|---|---|"]
    for r in rs:
        label = r.label if r.label.startswith("`") else f"`{r.label}`"
        status = r.status if r.status == expected else f"**{r.status}**"
        out.append(f"| {label} | {status} | {r.where.replace('|', '&#124;')} |")
    return out


def _extra_rows() -> list[str]:
    """Rules for names OPS.md does not list."""
    functions, methods, ufuncs = _tables()
    listed = {e for _, es in TIER1 + TIER2 for e in es if isinstance(e, str)}
    listed_objs = {id(_np_attr(n)) for n in listed if _np_attr(n) is not None}
    extra_u = sorted(u for u in ufuncs if u not in listed and id(_np_attr(u)) not in listed_objs)
    extra_f = sorted({getattr(f, "__qualname__", getattr(f, "__name__", repr(f)))
                      for f in functions if id(f) not in listed_objs})
    return [f"- ufuncs: {', '.join(f'`{u}`' for u in extra_u) or '(none)'}",
            f"- functions and methods: {', '.join(f'`{f}`' for f in extra_f) or '(none)'}",
            f"- ufunc methods: {', '.join(f'`{m}`' for m in sorted(methods))}"]


def generate() -> str:
    sections = [(title, rows(es)) for title, es in TIER1]
    tier2 = rows(TIER2[0][1])
    breaks = [probe(*p) for p in ALWAYS_BREAK]
    n1 = sum(len(rs) for _, rs in sections)
    c1 = sum(r.captured for _, rs in sections for r in rs)
    errors = [r for _, rs in sections for r in rs] + tier2 + breaks
    n_err = sum(r.status == "error" for r in errors)
    lines = [
        "# Supported numpy surface",
        "",
        "Generated by `python -m lowering.surface > docs/SURFACE.md`; do not edit by hand",
        "(`tests/test_surface.py` fails when this file is out of date). Each row of",
        "OPS.md's lists: functions, ufuncs and ufunc methods are looked up in capture's",
        "rule tables (`registry.FUNCTIONS`, `registry.UFUNC_METHODS`, `SUPPORTED_UFUNCS`;",
        "the rule column names the file with the rule); syntax is probed (`probe`): a",
        "one-line program on small float32/int64/bool arrays traced by `lowering.explain`,",
        "captured when it records no graph break. A graph break is not an error: that",
        "piece runs in eager numpy and the result is numpy's.",
        "",
        f"**Tier 1: {c1} of {n1} rows captured.** "
        f"Tier 2: {sum(r.captured for r in tier2)} of {len(tier2)}."
        + (f" **{n_err} rows crash capture** (status `error`: a bug)." if n_err else ""),
        "",
        "| section | captured |",
        "|---|---|",
    ]
    lines += [f"| {t} | {sum(r.captured for r in rs)} / {len(rs)} |" for t, rs in sections]
    lines.append("")
    lines.append("## Tier 1")
    for title, rs in sections:
        lines += ["", f"### {title}", ""] + _table(rs)
    lines += ["", "## Tier 2", ""] + _table(tier2)
    lines += ["", "## Always a graph break (by design)", "",
              "Data-dependent output shapes and Python control flow on array values. The",
              "status says what capture did with the probe: a graph break is the right answer.",
              ""]
    lines += _table(breaks, expected="graph break")
    lines += ["", "## Rules beyond OPS.md", ""] + _extra_rows()
    return "\n".join(lines) + "\n"


def main() -> int:
    sys.stdout.write(generate())
    return 0


if __name__ == "__main__":
    os.environ.setdefault("LOWERING_LOGS", "")
    sys.exit(main())
