"""`python -m bench --programs`: every program of bench/programs at sizes
S and M on numpy, lowering, numba and jax, in one process; writes
bench/results/<host>-programs[-quick].{json,md}.

Per program and size, each peer gets a fresh wrapper (numba: one
dispatcher per program, shared by its sizes), a first call (timed, compile
included; its result checked against numpy's), then the median of timed
samples (bench.timing.measure). A program and size is run again (up to
--attempts times) while other processes take more than 10% of the machine. A peer's failure is recorded in its cell
and the run goes on; a lowering result that differs from numpy's is a
FAILED row."""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path

from .. import env
from ..peers.base import NotExpressible
from ..runner import error_text, log
from ..timing import measure
from .base import Program
from .check import compare
from .peers import PEERS, prepare, stats, unavailable, version

RESULTS = Path(__file__).resolve().parent.parent / "results"
BUSY = 0.1  # others' share of the machine's CPU above which a row is marked
BUSY_NOTE = (
    "other processes used more than 10% of the machine's CPU while this row ran: its times "
    "are suspect (a multithreaded call — BLAS, lowering's kernels, numba's prange — waits "
    "for a core another process holds; times then cluster at multiples of 4 ms)")
SAMPLE_S = 2e-3  # a timed sample repeats the call until it lasts about this long
MAX_INNER = 200
# a pause before each peer's timed calls: the thread pools of the peer or
# program measured before it (OpenBLAS's, XLA's, numba's, ours) spin for up
# to ~0.1-0.2 s after their last work before they sleep, and on a 2-core
# machine a spinning thread takes a core from the threads of the peer timed
# next (measured: a 600x600 float64 matrix-vector chain, lowering's two
# threads, 0.047 ms a call with lowering the only peer, 0.135 ms in the
# full run right after JAX and numba)
SETTLE_S = 0.3


def parse(argv: list[str]) -> argparse.Namespace:
    from . import PROGRAMS

    ap = argparse.ArgumentParser(prog="python -m bench --programs",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="programs, comma-separated (default: all)")
    ap.add_argument("--sizes", default="S,M", help="sizes, comma-separated: T, S, M (default S,M)")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help="peers, comma-separated (default: all); numpy always runs")
    ap.add_argument("--quick", action="store_true", help="3 samples, 1 warm-up call")
    ap.add_argument("--attempts", type=int, default=3,
                    help="runs of a program and size while other processes use more than "
                    f"{100 * BUSY:.0f}%% of the CPU (the quietest is kept; default 3)")
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    a.only = [n.strip() for n in a.only.split(",")] if a.only else list(PROGRAMS)
    a.sizes = [s.strip().upper() for s in a.sizes.split(",") if s.strip()]
    a.peers = [p.strip().lower() for p in a.peers.split(",") if p.strip()]
    for what, got, known in (("program", a.only, PROGRAMS), ("size", a.sizes, ("T", "S", "M")),
                             ("peer", a.peers, PEERS)):
        bad = [x for x in got if x not in known]
        if bad:
            ap.error(f"unknown {what}(s) {bad}; known: {', '.join(known)}")
    a.peers = ["numpy", *[p for p in PEERS if p in a.peers and p != "numpy"]]
    return a


def run_peer(peer: str, p: Program, inputs: tuple, ref, repeats: int, warmup: int) -> dict:
    """One peer on one program and size: prepare, first call, check, timing."""
    try:
        run = prepare(peer, p, inputs)
    except NotExpressible as e:
        return {"status": "not_expressible", "reason": str(e)}
    except Exception as e:  # noqa: BLE001 - recorded, the run goes on
        return {"status": "error", "stage": "prepare", "error": error_text(e)}
    out: dict = {}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            result = run()
            out["first_call_ms"] = (time.perf_counter() - t0) * 1e3
        out["warnings"] = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
        out["check"] = compare(result, ref)
        del result
        out["stats_first_call"] = stats(run)
        t0 = time.perf_counter()
        run()
        one = time.perf_counter() - t0
        inner = max(1, min(MAX_INNER, int(SAMPLE_S / max(one, 1e-9))))
        time.sleep(SETTLE_S)  # (the threads of what ran before go idle)
        out.update(measure(run, repeats=repeats, warmup=warmup, inner=inner))
    except Exception as e:  # noqa: BLE001
        out.update(status="error", stage="first call" if "check" not in out else "timed calls",
                   error=error_text(e))
        out["stats"] = stats(run)
        return out
    out["status"] = "ok" if out["check"]["ok"] else "check_failed"
    out["stats"] = stats(run)
    return out


def describe(peer: str, r: dict) -> str:
    if "median_ms" not in r:
        return f"{r['status']}: {r.get('error') or r.get('reason')}"[:300]
    c = r["check"]
    text = (f"{r['median_ms']:10.4f} ms  first {r['first_call_ms']:9.1f} ms  "
            f"max err {c['max_abs_err']:.2e}")
    st = r.get("stats")
    if st:
        text += f"  graph breaks {st['graph_breaks']} fallbacks {st['eager_fallbacks']}"
    if r["status"] == "check_failed":
        text += ("  FAILED: " if peer == "lowering" else "  check failed: ") + "; ".join(
            c["problems"])
    return text


def run_row(p: Program, size: str, peers: list[str], avail: dict, repeats: int,
            warmup: int) -> dict:
    """Every peer on one program and size, and the share of the machine's CPU
    other processes used meanwhile."""
    inputs = p.inputs(size)
    ref = p.fn(*inputs)
    row = {"program": p.name, "domain": p.domain, "what": p.what, "size": size,
           "dims": list(p.sizes[size]), "results": {}}
    snap = env.cpu_snapshot()
    for peer in peers:
        if avail[peer]:
            r = {"status": "unavailable", "reason": avail[peer]}
        else:
            t0 = time.perf_counter()
            r = run_peer(peer, p, inputs, ref, repeats, warmup)
            r["wall_s"] = time.perf_counter() - t0  # everything, compile to last sample
        row["results"][peer] = r
        log(f"{p.name:16s} {size} {peer:9s} {describe(peer, r)}")
    row["others_cpu_share"] = env.others_share(snap, env.cpu_snapshot())
    return row


def merge_attempts(attempts: list[dict]) -> dict:
    """The quietest attempt's times, with the first attempt's first calls
    (the real compiles: a retry finds the peers' in-process caches warm) and,
    for a peer that failed in any attempt, that failure."""
    best = dict(min(attempts, key=lambda r: r["others_cpu_share"]))
    best["results"] = dict(best["results"])
    for peer, r in best["results"].items():
        first = attempts[0]["results"][peer]
        failed = [a["results"][peer] for a in attempts if a["results"][peer]["status"] != "ok"]
        if failed and r["status"] == "ok":
            r = failed[0]
        elif "first_call_ms" in first and "first_call_ms" in r:
            r = {**r, "first_call_ms": first["first_call_ms"],
                 "stats_first_call": first.get("stats_first_call"),
                 "first_call_ms_this_attempt": r["first_call_ms"]}
        best["results"][peer] = r
    best["attempts"] = [a["others_cpu_share"] for a in attempts]
    return best


def run_all(a: argparse.Namespace, repeats: int, warmup: int) -> dict:
    from . import PROGRAMS

    avail = {peer: unavailable(peer) for peer in a.peers}
    rows = []
    for name in a.only:
        for size in a.sizes:
            attempts = []
            while not attempts or (len(attempts) < a.attempts
                                   and min(r["others_cpu_share"] for r in attempts) > BUSY):
                if attempts:
                    log(f"{name} {size}: other processes used "
                        f"{100 * attempts[-1]['others_cpu_share']:.0f}% of the CPU; again")
                attempts.append(run_row(PROGRAMS[name], size, a.peers, avail, repeats, warmup))
                # what survives (the peers' caches: lowering keeps its IR, ~1.6 M
                # objects by the end of a run) is not walked again by later
                # collections, the timer's gc.collect included (1 s each by then)
                gc.collect()
                gc.freeze()
            rows.append(merge_attempts(attempts))
    info = {peer: {"available": avail[peer] is None, "reason": avail[peer],
                   "version": version(peer) if avail[peer] is None else None}
            for peer in a.peers}
    return {"peers": info, "rows": rows}


def speedups(rows: list[dict], peer: str) -> list[tuple[dict, float]]:
    """(row, numpy time / peer time) for the rows where the peer's result passed."""
    out = []
    for row in rows:
        base, r = row["results"]["numpy"], row["results"].get(peer, {})
        if r.get("status") == "ok" and "median_ms" in base:
            out.append((row, base["median_ms"] / r["median_ms"]))
    return out


def summary(rows: list[dict], peers: list[str], sizes: list[str]) -> dict:
    out: dict = {}
    for peer in peers:
        if peer == "numpy":
            continue
        per: dict = {}
        for size in [*sizes, "all"]:
            sel = [r for r in rows if size == "all" or r["size"] == size]
            sp = speedups(sel, peer)
            failed = [f"{r['program']} {r['size']}" for r in sel
                      if r["results"].get(peer, {}).get("status") == "check_failed"]
            errors = [f"{r['program']} {r['size']}" for r in sel
                      if r["results"].get(peer, {}).get("status") == "error"]
            if not sp:
                per[size] = {"n": 0, "failed": failed, "errors": errors}
                continue
            worst_row, worst = min(sp, key=lambda t: t[1])
            per[size] = {
                "n": len(sp),
                "geomean": math.exp(statistics.fmean(math.log(s) for _, s in sp)),
                "worst": {"program": worst_row["program"], "size": worst_row["size"],
                          "speedup": worst},
                "at_least_numpy": sum(s >= 1.0 for _, s in sp),
                "failed": failed,
                "errors": errors,
            }
        out[peer] = per
    return out


def fmt(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "–"
    if x == 0:
        return "0"
    return f"{x:.{max(0, 2 - math.floor(math.log10(abs(x))))}f}"


def markdown(res: dict) -> str:
    peers = [p for p in res["peers"] if p != "numpy"]
    e = res["environment"]
    notes: dict[str, int] = {}

    def note(text: str) -> str:
        text = " ".join(text.split())[:400]
        return f"[{notes.setdefault(text, len(notes) + 1)}]"

    def cell(peer: str, r: dict, base: dict | None) -> list[str]:
        if "median_ms" not in r:
            mark = {"not_expressible": "–", "unavailable": "n/a"}.get(r["status"], "err")
            stage = f" ({r['stage']})" if r.get("stage") else ""
            return [mark + note(f"{peer}{stage}: {r.get('error') or r.get('reason')}"), ""]
        t = fmt(r["median_ms"])
        sp = fmt(base["median_ms"] / r["median_ms"]) if base and "median_ms" in base else "–"
        if r["status"] == "check_failed":
            text = note(f"{peer} check failed: {'; '.join(r['check']['problems'])}")
            return [f"**FAILED** {t}{text}" if peer == "lowering" else f"{t} ✗{text}", sp]
        return [t, sp]

    lines = [
        "# Real numpy programs — " + e["host"],
        "",
        f"`{res['command']}` — {res['created']}, {fmt(res['elapsed_s'])} s.",
        "",
        f"- CPU: {e['cpu_model']}, {e['affinity']} threads usable; Python {e['python']}; "
        + ", ".join(f"{p} {i['version']}" for p, i in res["peers"].items() if i["available"]),
        f"- Load average at start {e['loadavg_start'][0]:.2f}; other processes used "
        f"{100 * e['others_cpu_share']:.1f}% of the machine's CPU during the run"
        + (" — **a busy machine**" if e["others_cpu_share"] > BUSY else "")
        + f"; {sum(r['others_cpu_share'] > BUSY for r in res['rows'])} of {len(res['rows'])} "
        f"rows ran while others used more than {100 * BUSY:.0f}% (after up to "
        f"{res['settings']['attempts']} attempts each: the quietest kept, first calls from "
        "the first)",
        f"- Median of {res['settings']['repeats']} samples after {res['settings']['warmup']} "
        f"warm-up calls (a sample repeats the call to about {SAMPLE_S * 1e3:.0f} ms); "
        "checked against numpy's result: rtol 1e-6 (float64) / 1e-3 (float32), floor "
        "rtol·1e-2·max|ref|",
        "- Speedup × = numpy time / peer time; first call = the call that compiles "
        "(lowering: a fresh `lowering.compile(fn)` per size, empty on-disk cache; numba: "
        "one dispatcher per program, so its M call reuses S's compile)",
        "",
        "## Summary",
        "",
        "| peer | size | programs passing | geomean speedup | ≥ 1.0× numpy | worst | "
        "failed | errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for peer, per in res["summary"].items():
        for size, s in per.items():
            worst = (f"{s['worst']['program']} {s['worst']['size']} {fmt(s['worst']['speedup'])}×"
                     if s["n"] else "–")
            lines.append(
                f"| {peer} | {size} | {s['n']} | {fmt(s.get('geomean'))}× | "
                f"{s.get('at_least_numpy', 0)} of {s['n']} | {worst} | "
                f"{', '.join(s['failed']) or '–'} | {', '.join(s['errors']) or '–'} |")
    head = ["program", "size", "numpy ms"]
    for peer in peers:
        head += [f"{peer} ms", "×"]
        if peer == "lowering":
            head += ["lowering first call ms", "graph breaks / fallbacks"]
    lines += ["", "## Times", "", "| " + " | ".join(head) + " |",
              "|" + "---|" * len(head)]
    for row in res["rows"]:
        base = row["results"]["numpy"]
        busy = row["others_cpu_share"] > BUSY
        cells = [row["program"] + (note(BUSY_NOTE) if busy else ""), row["size"],
                 fmt(base.get("median_ms"))]
        for peer in peers:
            r = row["results"].get(peer, {"status": "unavailable", "reason": "not run"})
            cells += cell(peer, r, base)
            if peer == "lowering":
                st = r.get("stats") or {}
                cells.append(fmt(r.get("first_call_ms")))
                warn = "".join(note(f"lowering warned: {w}") for w in r.get("warnings", []))
                cells.append(f"{st['graph_breaks']} / {st['eager_fallbacks']}{warn}"
                             if st else "–")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## First calls, ms (compile included)", "",
              "| program | size | " + " | ".join(peers) + " |",
              "|---|---|" + "---|" * len(peers)]
    for row in res["rows"]:
        lines.append(f"| {row['program']} | {row['size']} | " + " | ".join(
            fmt(row["results"].get(p, {}).get("first_call_ms")) for p in peers) + " |")
    lines += ["", "## Programs", "", "| program | domain | what | sizes (builder arguments) |",
              "|---|---|---|---|"]
    seen = set()
    from . import PROGRAMS

    for row in res["rows"]:
        if row["program"] in seen:
            continue
        seen.add(row["program"])
        p = PROGRAMS[row["program"]]
        dims = ", ".join(f"{k} {v}" for k, v in p.sizes.items() if k != "T")
        lines.append(f"| {p.name} | {p.domain} | {p.what} | {dims} |")
    if notes:
        lines += ["", "## Notes", ""] + [f"{i}. {t}" for t, i in notes.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    a = parse(argv)
    cache = tempfile.mkdtemp(prefix="bench-lowering-cache-")
    os.environ["LOWERING_CACHE_DIR"] = cache  # first calls compile: no entries from earlier runs
    try:
        return _main(a, argv)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _main(a: argparse.Namespace, argv: list[str]) -> int:
    t_start = time.perf_counter()
    repeats, warmup = (3, 1) if a.quick else (10, 2)
    environment = env.describe()
    snap = env.cpu_snapshot()
    res = {
        "schema": 1,
        "command": "python -m bench --programs " + " ".join(argv),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": {"repeats": repeats, "warmup": warmup, "sizes": a.sizes,
                     "sample_s": SAMPLE_S, "attempts": a.attempts},
        "environment": environment,
    }
    res.update(run_all(a, repeats, warmup))
    res["threadpools"] = env.threadpools()
    res["summary"] = summary(res["rows"], list(res["peers"]), a.sizes)
    environment["loadavg_end"] = os.getloadavg()
    environment["others_cpu_share"] = env.others_share(snap, env.cpu_snapshot())
    res["elapsed_s"] = time.perf_counter() - t_start
    a.out_dir.mkdir(parents=True, exist_ok=True)
    base = a.out_dir / (f"{env.host()}-programs" + ("-quick" if a.quick else ""))
    base.with_suffix(".json").write_text(json.dumps(res, indent=1, default=str))
    md = markdown(res)
    base.with_suffix(".md").write_text(md)
    log(f"wrote {base}.json, {base}.md")
    print(md)
    failed = res["summary"].get("lowering", {}).get("all", {}).get("failed", [])
    if failed:
        log(f"lowering FAILED (results differ from numpy): {', '.join(failed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
