"""Measure the cost table on this machine: `python -m lowering.calibrate`.

For every shape class of `passes/cost_model.py` (an op that both a generated
kernel and a library routine can compute), compile small programs over a
grid of shapes twice — the class's path forced to the generated kernel, then
to the routine — time each cached call (median of batches), and fit each
path's rate (overhead, ns per byte moved, ns per flop: non-negative least
squares on relative error). The table goes to the cache directory's
`cost_table.json` (where the compiler looks for a calibrated table: see
`table_for_process`), or `--out PATH`; `--ship` writes the table the package
ships for this machine's kind (`passes/cost_tables/<kind>.json`). `--quick` uses a small grid (a check that
calibrating works, not a table to keep). `--only CLASSES` measures those
classes and keeps the others' rates from the table it writes over (a class
added to the model gets its rates without re-deciding every other class).

    python -m lowering.calibrate            # measure, write, print the fit
    python -m lowering.calibrate --show     # the table in use and its choices
    python -m lowering.calibrate --only matmul-shared-rows --ship
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from passes import cost_model as cm
from passes.lower_to_loop import SHARED_ROW_BYTES, matmul_work, power_work, shared_rows_work
from runtime import cpu, disk_cache

from .cost_tables import TABLE_NAME, machine_name, table_for_process

# ---- the programs timed, per class ---------------------------------------------

@dataclass(frozen=True)
class Case:
    """One timed program of a class: the function, its arguments, and the
    work each path does on them (as `lower_to_loop.work_of` counts it)."""

    shape_class: str
    label: str
    fn: Callable
    args: tuple
    work: cm.Work


def _matmul(a, b):
    return a @ b


def _relu_matmul(x, b):
    return np.maximum(x, 0) @ b


def _relu_matmul_kept(x, b):
    h = np.maximum(x, 0)
    return h @ b, h


def _masked_matmul_t(a, w, h):
    return (a @ w.T) * (h > 0)


def _matmul_add(a, b, c):
    return a @ b + c


def _atax(a, x):
    return a.T @ (a @ x)


def _logistic_gradient(a, w, y):
    return a.T @ (1.0 / (1.0 + np.exp(-(a @ w))) - y)


def _row_vector_chain(a, x):
    return (a @ x) @ a


def _two_columns(a, w):
    z = a @ w
    return a.T @ (z[:, 0] * z[:, 1])


def _any0(x):
    return np.any(x, axis=0)


def _sum1(x):
    return x.sum(axis=1)


def _power(x):
    return x ** 2.2


def _power_arrays(x, y):
    return np.power(x, y)


def _scaled_power(x, y):
    return 0.5 * (x + 1.0) ** y


def _cases(quick: bool) -> Iterable[Case]:
    rng = np.random.default_rng(0)
    dts = (np.float32,) if quick else (np.float32, np.float64)
    # matmul-narrow: (M, K) @ (K, N), N <= 16, K > 16
    narrow = ([(1, 512, 4), (64, 256, 10), (512, 1024, 8)] if quick else
              [(m, k, n) for m in (1, 4, 16, 64, 256, 1024) for k in (32, 512, 2048)
               for n in (1, 10, 16)])
    fused = ([(64, 256, 10), (512, 1024, 8)] if quick else
             [(m, k, n) for m in (16, 64, 256, 1024) for k in (128, 512, 2048) for n in (1, 10, 16)])
    for dt in dts:
        s, name = np.dtype(dt).itemsize, np.dtype(dt).name
        for m, k, n in narrow:
            a = rng.standard_normal((m, k)).astype(dt)
            b = rng.standard_normal((k, n)).astype(dt)
            yield Case("matmul-narrow", f"{name} {m}x{k}x{n}", _matmul, (a, b),
                       matmul_work("matmul-narrow", m, k, n, s, False, False, False))
        for m, k, n in fused:  # A from the kernel computing it (and stored: kept)
            a = rng.standard_normal((m, k)).astype(dt)
            b = rng.standard_normal((k, n)).astype(dt)
            yield Case("matmul-narrow", f"{name} relu {m}x{k}x{n}", _relu_matmul, (a, b),
                       matmul_work("matmul-narrow", m, k, n, s, False, True, False))
            yield Case("matmul-narrow", f"{name} relu kept {m}x{k}x{n}", _relu_matmul_kept,
                       (a, b), matmul_work("matmul-narrow", m, k, n, s, False, True, True))
    # matmul-short: K <= 16
    short = ([(256, 4, 256), (16, 16, 1024)] if quick else
             [(m, k, n) for m in (4, 64, 512) for k in (1, 4, 16) for n in (8, 256, 2048)])
    for dt, (m, k, n) in itertools.product(dts, short):
        s, name = np.dtype(dt).itemsize, np.dtype(dt).name
        a = rng.standard_normal((m, k)).astype(dt)
        b = rng.standard_normal((k, n)).astype(dt)
        yield Case("matmul-short", f"{name} {m}x{k}x{n}", _matmul, (a, b),
                   matmul_work("matmul-short", m, k, n, s, False, False, False))
        c = rng.standard_normal((m, n)).astype(dt)
        yield Case("matmul-short", f"{name} {m}x{k}x{n} + c", _matmul_add, (a, b, c),
                   matmul_work("matmul-short", m, k, n, s, True, False, False))
        w = rng.standard_normal((n, k)).astype(dt)
        yield Case("matmul-short", f"{name} ({m}x{k} @ w.T) * mask", _masked_matmul_t, (a, w, c),
                   matmul_work("matmul-short", m, k, n, s, True, False, False))
    # matmul-shared-rows: A (M, K) read by a product of its rows and the transposed
    # product that consumes it row by row; A in a last-level cache or not (streamed)
    shared = ([(256, 256), (4096, 128), (70000, 128)] if quick else
              [(64, 64), (256, 256), (500, 32), (600, 600), (1024, 128), (4096, 64),
               (4096, 512), (10000, 32), (16384, 128), (1000, 1000), (2000, 1500),
               (20000, 512), (50000, 128), (100000, 128), (200000, 32), (30000, 1024),
               (500, 2000), (1900, 2100), (200, 4000), (4000, 4000), (12000, 2048)])
    for dt, (m, k) in itertools.product(dts, shared):
        s, name = np.dtype(dt).itemsize, np.dtype(dt).name
        if k * s > SHARED_ROW_BYTES:  # (not of the class: BLAS's)
            continue
        a = rng.standard_normal((m, k)).astype(dt)
        x = (rng.standard_normal(k) / np.sqrt(k)).astype(dt)
        yield Case("matmul-shared-rows", f"{name} A.T @ (A @ x) {m}x{k}", _atax, (a, x),
                   shared_rows_work(m, k, [1], s))
        yield Case("matmul-shared-rows", f"{name} (A @ x) @ A {m}x{k}", _row_vector_chain,
                   (a, x), shared_rows_work(m, k, [1], s))
        if quick:
            continue
        y = (rng.random(m) > 0.5).astype(dt)
        yield Case("matmul-shared-rows", f"{name} logistic gradient {m}x{k}", _logistic_gradient,
                   (a, x, y), shared_rows_work(m, k, [1], s, row_ops=2))  # exp, 1 / (1 + e)
        if m * k >= 1 << 18:
            w = (rng.standard_normal((k, 2)) / np.sqrt(k)).astype(dt)
            yield Case("matmul-shared-rows", f"{name} A.T @ (z0 * z1), z = A @ W {m}x{k}x2",
                       _two_columns, (a, w), shared_rows_work(m, k, [2], s))
    # reductions over leading axes that the loop level does not accumulate
    cols = ([(64, 64), (2048, 512)] if quick else
            [(r, c) for r in (8, 64, 512, 4096) for c in (8, 128, 1024)])
    for r, c in cols:
        x = rng.standard_normal((4, r, c)).astype(np.float32)  # over the middle axis
        yield Case("column-reduction", f"float32 4x{r}x{c} sum axis 1", _sum1, (x,),
                   cm.Work(x.nbytes + 16 * c, x.nbytes + 16 * c, 4 * r * c, 4 * r))
        xb = x[0] > 0.5
        yield Case("column-any", f"bool {r}x{c} any", _any0, (xb,),
                   cm.Work(xb.nbytes + c, xb.nbytes + c, r * c, r))
    # x ** y by an exponent strength-reduce leaves; alone, and between kernels
    sizes = ([64, 1 << 14, 1 << 19] if quick else
             [16, 256, 1 << 11, 1 << 14, 1 << 17, 1 << 19, 1 << 21])
    threads, threshold = cpu.THREADS, cpu.parallel_threshold()
    for dt, n in itertools.product((np.float32, np.float64), sizes):
        s, name = np.dtype(dt).itemsize, np.dtype(dt).name
        x = rng.uniform(0.0, 3.0, n).astype(dt)
        y = rng.uniform(-3.0, 3.0, n).astype(dt)
        yield Case("power", f"{name} x ** 2.2 [{n}]", _power, (x,),
                   power_work(n, s, 0, False, threads, threshold))
        if quick:
            continue
        yield Case("power", f"{name} x ** y [{n}]", _power_arrays, (x, y),
                   power_work(n, s, 0, False, threads, threshold))
        yield Case("power", f"{name} 0.5 * (x + 1) ** y [{n}]", _scaled_power, (x, y),
                   power_work(n, s, 1, True, threads, threshold))


# ---- timing and fitting ------------------------------------------------------------

def time_call(f: Callable, args: tuple, budget: float = 0.02, batches: int = 5) -> float:
    """µs of one call: the fastest of `batches` batches of about `budget` s
    (the least disturbed by whatever else the machine runs)."""
    f(*args)
    t0 = time.perf_counter()
    f(*args)
    one = max(time.perf_counter() - t0, 1e-7)
    reps = max(1, min(10000, int(budget / one)))
    out = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(reps):
            f(*args)
        out.append((time.perf_counter() - t0) / reps)
    return min(out) * 1e6


def measure(case: Case, path: str) -> float:
    """The cached call's µs with case's class forced to `path`."""
    import lowering

    with cm.forced({case.shape_class: path}):
        f = lowering.compile(case.fn, fullgraph=True)  # (a fallback: CompileError)
        want, got = case.fn(*case.args), f(*case.args)
        for w, g in zip(*(x if isinstance(x, tuple) else (x,) for x in (want, got))):
            if not np.allclose(g, w, rtol=1e-4, atol=1e-4 * np.abs(w).max(initial=1.0)):
                raise AssertionError(f"calibrate: {case.label} ({path}) differs from numpy")
        v = "" if case.work.variant == "plain" else f" ({case.work.variant})"
        decided = f"{case.shape_class}{v}: {_what(case.shape_class, path)} (forced)"
        paths = [p for ps in lowering.explain(f)(*case.args).paths for p in ps]
        if not any(p.endswith(decided) for p in paths):
            raise AssertionError(f"calibrate: {case.label} is not a {case.shape_class} op "
                                 f"(the lowering decided: {paths})")
        return time_call(f, case.args)


def _what(shape_class: str, path: str) -> str:
    c = cm.CLASSES[shape_class]
    return c.generated if path == "generated" else c.library


# the share of a class's points a fit may drop as disturbed calls (one at least)
OUTLIERS_AT_MOST = 0.05


def fit(points: list[tuple[cm.Work, float]], path: str) -> cm.Rate:
    """Non-negative least squares on relative error: the (overhead, ns/byte,
    ns/flop, ns/row) of least squared relative misfit, over every subset of
    the coefficients (four unknowns: the active-set search is exhaustive);
    then once more without the points more than 2x off the first fit (a
    call the machine disturbed: another process on a BLAS thread's core),
    where they are few (`OUTLIERS_AT_MOST`)."""
    X = np.array([[1.0, w.bytes(path) / 1000, w.flops_of(path) / 1000, w.rows_of(path) / 1000]
                  for w, _ in points])
    t = np.array([t for _, t in points])
    coef = _nnls_relative(X, t)
    ratio = t / np.maximum(X @ coef, 1e-9)
    keep = (ratio < 2.0) & (ratio > 0.5)
    # (a disturbed call is rare: where many points are off, the fit misses a
    # term they share — a program's per-row work — and keeps them all)
    if keep.sum() >= 4 and not keep.all() and (~keep).sum() <= max(1, OUTLIERS_AT_MOST * len(t)):
        coef = _nnls_relative(X[keep], t[keep])
    return cm.Rate(*map(float, coef))


def _nnls_relative(X: np.ndarray, t: np.ndarray) -> np.ndarray:
    W = 1.0 / t
    best, best_err = np.zeros(X.shape[1]), np.inf
    for cols in itertools.chain.from_iterable(itertools.combinations(range(X.shape[1]), r)
                                              for r in range(1, X.shape[1] + 1)):
        coef, *_ = np.linalg.lstsq(X[:, cols] * W[:, None], t * W, rcond=None)
        if (coef < 0).any():
            continue
        full = np.zeros(X.shape[1])
        full[list(cols)] = coef
        err = float(np.sum(((X @ full) * W - 1.0) ** 2))
        if err < best_err:
            best, best_err = full, err
    return best


def calibrate(quick: bool = False, log=print,
              only: Collection[str] | None = None) -> tuple[cm.CostTable | _Partial, list]:
    """Measure every case (of the classes in `only`, if given) on both paths;
    the fitted table (of those classes' rates only, with `only`) and the raw
    rows (class, label, path, µs, predicted µs)."""
    cases = [c for c in _cases(quick) if only is None or c.shape_class in only]
    measured: dict[tuple[str, str], list[tuple[Case, float]]] = {}
    for i, case in enumerate(cases, 1):
        key = f"{case.shape_class}/{case.work.variant}"
        for path in cm.PATHS:
            us = measure(case, path)
            measured.setdefault((key, path), []).append((case, us))
            log(f"[{i}/{len(cases)}] {case.shape_class:17} {case.label:32} {path:9} {us:10.1f} µs")
    rates: dict[str, dict[str, cm.Rate]] = {}
    rows = []
    for (cls, path), pts in measured.items():
        r = fit([(c.work, us) for c, us in pts], path)
        rates.setdefault(cls, {})[path] = r
        for c, us in pts:
            rows.append((cls, c.label, path, us,
                         r.time_us(c.work.bytes(path), c.work.flops_of(path), c.work.rows_of(path))))
    source = f"python -m lowering.calibrate{' --quick' if quick else ''}, {time.strftime('%Y-%m-%d')}"
    if only is not None:
        return _Partial(machine_name(), source, rates), rows
    return cm.CostTable(machine_name(), source, rates), rows


@dataclass(frozen=True)
class _Partial:
    """The rates of some classes (`calibrate(only=...)`), to merge into a table."""

    machine: str
    source: str
    rates: dict

    def into(self, base: dict, where: str) -> cm.CostTable:
        """The table `base` (its JSON: it may lack these classes, new ones)
        with these classes' rates in; the source names both measurements
        (and the machines, where they differ)."""
        on = "" if self.machine == base["machine"] else f" on {self.machine}"
        classes = ", ".join(sorted({k.split("/")[0] for k in self.rates}))
        rates = {**base["rates"], **{c: {p: [r.overhead_us, r.ns_per_byte, r.ns_per_flop,
                                               r.ns_per_row] for p, r in ps.items()}
                                     for c, ps in self.rates.items()}}
        return cm.CostTable.from_json(
            {"machine": base["machine"],
             "source": f"{base.get('source', where)}; {classes}: {self.source}{on}",
             "rates": rates}, where)


def agreement(rows: list) -> dict[str, float]:
    """Per class, the fraction of measured cases where the table picks the
    path that measured faster (or one within 10% of it), and the geometric
    mean of chosen time / best time."""
    by: dict[tuple[str, str], dict[str, tuple[float, float]]] = {}
    for cls, label, path, us, pred in rows:
        by.setdefault((cls, label), {})[path] = (us, pred)
    score: dict[str, list[float]] = {}
    for (cls, _), p in by.items():
        (gm, gp), (lm, lp) = p["generated"], p["library"]
        chosen = gm if gp <= lp else lm
        score.setdefault(cls, []).append(chosen / min(gm, lm))
    return {c: (sum(r <= 1.1 for r in v) / len(v), float(np.exp(np.mean(np.log(v)))))
            for c, v in score.items()}


def show(table: cm.CostTable, out=sys.stdout) -> None:
    out.write(f"cost table: {table.source} (machine {table.machine}, digest {table.digest})\n")
    for key, paths in sorted(table.rates.items()):
        c = cm.CLASSES[key.split("/")[0]]
        out.write(f"  {key}: {c.about}\n")
        for p in cm.PATHS:
            r = paths[p]
            what = c.generated if p == "generated" else c.library
            out.write(f"    {p:9} {r.overhead_us:7.2f} µs + {r.ns_per_byte:.4f} ns/B + "
                      f"{r.ns_per_flop:.4f} ns/flop + {r.ns_per_row:.3f} ns/row   ({what})\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lowering.calibrate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a small grid (checks, not a table to keep)")
    p.add_argument("--out", type=Path, help="write the table here")
    p.add_argument("--ship", action="store_true", help=f"write the table shipped for this machine kind ({cm.SHIPPED_DIR}/<kind>.json)")
    p.add_argument("--show", action="store_true", help="print the table in use and stop")
    p.add_argument("--only", help="measure these classes (comma-separated) and keep the other "
                                  "classes' rates from the table written over (or the one in use)")
    ns = p.parse_args(argv)
    if ns.show:
        show(table_for_process())
        return 0
    out = cm.SHIPPED_DIR / f"{machine_name()}.json" if ns.ship else ns.out or disk_cache.directory_from_env() / TABLE_NAME
    only = None if ns.only is None else [c.strip() for c in ns.only.split(",") if c.strip()]
    if only is not None and (not only or any(c not in cm.CLASSES for c in only)):
        p.error(f"--only: classes are {', '.join(cm.CLASSES)}")
    table, rows = calibrate(ns.quick, only=only)
    kept: list = []  # the measurements of the classes not measured now
    if isinstance(table, _Partial):
        base = json.loads(out.read_text()) if out.is_file() else table_for_process().to_json()
        table = table.into(base, str(out))
        if out.is_file():
            kept = [r for r in json.loads(out.read_text()).get("measured", [])
                    if r["class"].split("/")[0] not in only]
    show(table)
    for cls, (frac, regret) in sorted(agreement(rows).items()):
        print(f"  {cls}: the faster path (within 10%) in {frac:.0%} of the cases; "
              f"chosen / best time {regret:.3f} (geomean)")
    out.parent.mkdir(parents=True, exist_ok=True)
    data = table.to_json()  # (the measurements ride along: not part of the digest)
    data["measured"] = kept + [{"class": c, "case": label, "path": path, "us": round(us, 2),
                                "fitted_us": round(pred, 2)} for c, label, path, us, pred in rows]
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
