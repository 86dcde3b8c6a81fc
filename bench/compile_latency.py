"""Compile latency: first call minus steady state, in a fresh process.

`python -m bench.compile_latency --peer lowering[numpy] --order W1,W5` runs
in a new interpreter: it imports the peer (timed), then compiles and runs
the workloads in the given order. The first one is compiled in a *fresh*
process, the next ones in a *warm* process (one that has compiled
something). The parent runs each peer twice, W1 first then W5 first, so
both workloads get both numbers. The child prints its JSON on the last line.

`--import-time` instead times `import lowering` (after numpy) and `import
numpy` in a new interpreter."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

MARK = "BENCH_JSON "
IMPORT_SNIPPET = (
    "import time; t0 = time.perf_counter(); import numpy; t1 = time.perf_counter(); "
    "import lowering; t2 = time.perf_counter(); print(t1 - t0, t2 - t1)"
)


def child(peer_name: str, order: list[str], size: str, repeats: int) -> dict:
    from . import peers as registry
    from .timing import measure
    from .workloads import WORKLOADS

    family = peer_name.split("[", 1)[0]
    t0 = time.perf_counter()
    (peer,) = [p for p in registry.make(family) if p.name == peer_name]
    reason = peer.unavailable()  # imports the peer's package
    out: dict = {"peer": peer_name, "import_s": time.perf_counter() - t0, "workloads": {}}
    if reason:
        out["error"] = reason
        return out
    for i, key in enumerate(order):
        w = WORKLOADS[key]
        inputs = w.inputs(size)
        entry: dict = {"process": "fresh" if i == 0 else "warm"}
        try:
            # prepare compiles nothing: it wraps the function (torch.compile's
            # first use imports dynamo) and converts inputs (jax's device_put)
            t0 = time.perf_counter()
            run = peer.prepare(w, inputs)
            t1 = time.perf_counter()
            run()
            first_ms = (time.perf_counter() - t1) * 1e3
            steady = measure(run, repeats=repeats, warmup=1)["median_ms"]
            entry.update(
                prepare_ms=(t1 - t0) * 1e3,
                first_call_ms=first_ms,
                steady_ms=steady,
                compile_ms=first_ms - steady,
            )
        except Exception as e:  # noqa: BLE001 - recorded for the report
            entry["error"] = f"{type(e).__name__}: {e}"[:2000]
        out["workloads"][key] = entry
    return out


def _run(cmd: list[str], timeout: float) -> tuple[dict | None, str]:
    env = dict(os.environ)
    cache = tempfile.mkdtemp(prefix="bench-inductor-")
    env["TORCHINDUCTOR_CACHE_DIR"] = cache  # a cold Inductor cache: a real compile
    try:
        p = subprocess.run(
            cmd, check=False, capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s"
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK) :]), ""
    return None, f"exit {p.returncode}: {(p.stderr or p.stdout)[-1500:]}"


def measure_peer(
    peer_name: str,
    keys: list[str],
    size: str,
    repeats: int,
    rotations: bool = True,
    timeout: float = 600,
) -> dict:
    """{workload: {fresh: {...}, warm: {...}}, import_s, error?} for one peer.
    With `rotations` each workload comes first once (a fresh number each);
    without, only the given order runs (one process: quicker)."""
    out: dict = {"workloads": {k: {} for k in keys}, "import_s": []}
    orders = [keys[i:] + keys[:i] for i in range(len(keys) if rotations else 1)]
    for order in orders:
        cmd = [
            sys.executable,
            "-m",
            "bench.compile_latency",
            "--peer",
            peer_name,
            "--order",
            ",".join(order),
            "--size",
            size,
            "--repeats",
            str(repeats),
        ]
        res, err = _run(cmd, timeout)
        if res is None:
            out.setdefault("errors", []).append(f"order {','.join(order)}: {err}")
            continue
        out["import_s"].append(res["import_s"])
        if "error" in res:
            out.setdefault("errors", []).append(res["error"])
        for k, e in res["workloads"].items():
            out["workloads"][k][e["process"]] = e
    out["import_s"] = min(out["import_s"]) if out["import_s"] else None
    return out


def import_time(runs: int = 5) -> dict:
    """Median over fresh interpreters of `import numpy` and then `import lowering`."""
    numpy_s, lowering_s = [], []
    for _ in range(runs):
        p = subprocess.run(
            [sys.executable, "-c", IMPORT_SNIPPET],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if p.returncode != 0:
            return {"error": p.stderr[-1500:]}
        a, b = map(float, p.stdout.split())
        numpy_s.append(a)
        lowering_s.append(b)
    return {
        "numpy_s": statistics.median(numpy_s),
        "lowering_after_numpy_s": statistics.median(lowering_s),
        "runs": runs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer", required=True)
    ap.add_argument("--order", required=True)
    ap.add_argument("--size", default="full")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    res = child(a.peer, a.order.split(","), a.size, a.repeats)
    print(MARK + json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
