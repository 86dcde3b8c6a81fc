"""Compile once: W1-W4 with `dynamic=True` at random sizes, the dynamic
program's speed next to the static one's, and W1's first call in a new
process with the on-disk cache warm.

    python -m bench.dynamic            # writes bench/results/<host>-dynamic.{json,md}
    python -m bench.dynamic --quick    # 10 sizes, 3 samples: a smoke run

Per workload: one `lowering.compile(fn, dynamic=True)` called at N random
(rows, cols) sizes (each from 2 to 2048, log-uniform; seeded), every result
checked against the float64 reference (bench.check) — the count of compiles
must be 1. Then, at 4096 x 4096, the same dynamic function (compiled at the
first random size, so nothing about 4096 is compiled in) and a
`dynamic=False` one, timed in the same run: their ratio is the price of
sizes as parameters."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from . import env

RESULTS = Path(__file__).resolve().parent / "results"
KEYS = ("W1", "W2", "W3", "W4")


def _sizes(n: int, seed: int = 0) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    return [tuple(int(v) for v in np.exp(rng.uniform(np.log(2), np.log(2048), 2)).round())
            for _ in range(n)]


def run(n_sizes: int, repeats: int) -> dict:
    import lowering

    from .check import check
    from .timing import measure
    from .workloads import WORKLOADS, _rows_inputs, as_tuple, reference

    params = {"W1": "wb", "W2": "", "W3": "b", "W4": "w"}
    out: dict = {}
    for key in KEYS:
        w = WORKLOADS[key]
        f = lowering.compile(w.fn, dynamic=True)
        problems: list[str] = []
        t0 = time.perf_counter()
        first_call = None
        for rows, cols in _sizes(n_sizes):
            inputs = _rows_inputs(rows, cols, params[key])
            s = time.perf_counter()
            got = as_tuple(f(*inputs))
            if first_call is None:
                first_call = time.perf_counter() - s
            res = check(got, reference(w, inputs), as_tuple(w.fn(*inputs)))
            if not res["ok"]:
                problems.append(f"{rows}x{cols}: {res['problems'][0]}")
        total = time.perf_counter() - t0
        big = _rows_inputs(4096, 4096, params[key])
        static = lowering.compile(w.fn, dynamic=False)
        static(*big)
        f(*big)
        res = check(as_tuple(f(*big)), reference(w, big), as_tuple(w.fn(*big)))
        if not res["ok"]:
            problems.append(f"4096x4096: {res['problems'][0]}")
        # interleaved, three rounds each: the least median of each (a memory-bound
        # kernel's time at this size moves by 10-20 % between rounds here)
        ts, td = [], []
        for _ in range(3):
            ts.append(measure(lambda: static(*big), repeats=repeats, warmup=1)["median_ms"] / 1e3)
            td.append(measure(lambda: f(*big), repeats=repeats, warmup=1)["median_ms"] / 1e3)
        t_static, t_dyn = min(ts), min(td)
        out[key] = {
            "name": w.name, "sizes": n_sizes, "compiles": f.stats["compiles"],
            "recompiles": f.stats["recompiles"], "eager_fallbacks": f.stats["eager_fallbacks"],
            "first_call_s": first_call, "all_sizes_s": total,
            "guards": f.entries[0].guards.describe() if f.entries else [],
            "static_4096_ms": t_static * 1e3, "dynamic_4096_ms": t_dyn * 1e3,
            "dynamic_over_static": t_dyn / t_static, "problems": problems,
        }
        print(f"{key} {w.name}: {f.stats['compiles']} compile(s) for {n_sizes} sizes "
              f"({total:.2f} s, first call {first_call:.2f} s); 4096x4096 static "
              f"{t_static * 1e3:.2f} ms, dynamic {t_dyn * 1e3:.2f} ms "
              f"({t_dyn / t_static:.2f}x){'; ' + problems[0] if problems else ''}", flush=True)
    return out


_CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
import numpy as np
import lowering
from lowering.capture import registry
from bench.workloads import layernorm, _rows_inputs
x, w, b = _rows_inputs(512, 512, "wb")
t = time.perf_counter()
registry._load_rules()  # (the capture rules, imported on a first call)
rules = time.perf_counter() - t
f = lowering.compile(layernorm)
t = time.perf_counter()
f(x, w, b)
first = time.perf_counter() - t
print("BENCH_JSON " + json.dumps({{"first_call_s": first + rules, "rules_import_s": rules,
                                   "cache": lowering.cache_info()}}))
"""


def warm_disk_cache(runs: int = 3) -> dict:
    """W1 (512 x 512) compiled in one process, then its first call in new
    processes finding the on-disk cache warm: the call's time (with the
    capture rules' import, which a first call pays) and what LLVM compiled.
    The children write bytecode caches as a user's Python does
    (PYTHONDONTWRITEBYTECODE unset)."""
    import os
    import subprocess
    import tempfile

    root = str(Path(__file__).resolve().parent.parent)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out: dict = {"runs": []}
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as d:
        env["LOWERING_CACHE_DIR"] = d
        for i in range(runs + 1):
            p = subprocess.run([sys.executable, "-c", _CHILD.format(root=root)], env=env,
                               capture_output=True, text=True, timeout=600, check=False)
            line = next((ln for ln in reversed(p.stdout.splitlines())
                         if ln.startswith("BENCH_JSON ")), None)
            if line is None:
                return {"error": (p.stderr or p.stdout)[-1500:]}
            r = json.loads(line[len("BENCH_JSON "):])
            (out.setdefault("cold", r) if i == 0 else out["runs"].append(r))
    warm = [r["first_call_s"] for r in out["runs"]]
    out["warm_first_call_ms"] = min(warm) * 1e3
    out["llvm_in_warm"] = max(r["cache"]["llvm"]["kernel_modules"] for r in out["runs"])
    print(f"W1 512x512, warm disk cache, new process: first call {min(warm) * 1e3:.1f} ms "
          f"(cold {out['cold']['first_call_s'] * 1e3:.0f} ms); LLVM kernel modules compiled "
          f"when warm: {out['llvm_in_warm']}", flush=True)
    return out


def markdown(res: dict, meta: dict) -> str:
    lines = [f"# Dynamic sizes: W1-W4 with `dynamic=True` ({meta['host']}, {meta['date']})", "",
             f"`python -m bench.dynamic{' --quick' if meta['quick'] else ''}`; CPU: {meta['cpu']}", "",
             "| workload | sizes | compiles | all sizes (s) | static 4096² (ms) | "
             "dynamic 4096² (ms) | dynamic / static | checked |",
             "|---|---|---|---|---|---|---|---|"]
    for key, r in res.items():
        lines.append(f"| {key} {r['name']} | {r['sizes']} | {r['compiles']} | "
                     f"{r['all_sizes_s']:.2f} | {r['static_4096_ms']:.2f} | "
                     f"{r['dynamic_4096_ms']:.2f} | {r['dynamic_over_static']:.2f} | "
                     f"{'ok' if not r['problems'] else r['problems'][0]} |")
    cache = meta.get("disk_cache", {})
    if "warm_first_call_ms" in cache:
        lines += ["", f"W1 512x512 in a new process with the on-disk cache warm: first call "
                      f"{cache['warm_first_call_ms']:.1f} ms (cold: "
                      f"{cache['cold']['first_call_s'] * 1e3:.0f} ms), LLVM kernel modules "
                      f"compiled: {cache['llvm_in_warm']}."]
    lines += ["", "Guards of each dynamic entry:", ""]
    for key, r in res.items():
        lines.append(f"- {key}: " + "; ".join(r["guards"]))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.dynamic", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10 sizes, 3 samples")
    ap.add_argument("--sizes", type=int, help="random sizes per workload (default 50)")
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    env.set_peer_defaults()
    n = a.sizes or (10 if a.quick else 50)
    res = run(n, 3 if a.quick else 10)
    meta = {"host": env.host(), "date": time.strftime("%Y-%m-%d"), "cpu": env.cpu_model(),
            "quick": a.quick, "disk_cache": warm_disk_cache(1 if a.quick else 3)}
    stem = f"{env.host()}-dynamic" + ("-quick" if a.quick else "")
    a.out_dir.mkdir(parents=True, exist_ok=True)
    (a.out_dir / f"{stem}.json").write_text(json.dumps({"meta": meta, "results": res}, indent=1))
    (a.out_dir / f"{stem}.md").write_text(markdown(res, meta))
    bad = [k for k, r in res.items() if r["problems"] or r["compiles"] != 1]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
