"""Runs the selected workloads on the selected peers in this process and
derives what the tables show: roofline, % of roofline, ratios vs lowering."""

from __future__ import annotations

import sys
import time
import traceback
from dataclasses import asdict, dataclass

from . import peers as peer_registry
from .check import check
from .peers.base import NotExpressible, Peer
from .timing import measure
from .workloads import WORKLOADS, Workload, as_tuple, reference, traffic_bytes


@dataclass(frozen=True)
class Settings:
    size: str = "full"  # "full" (BENCH.md's sizes) or "small"
    repeats: int = 10  # timed samples per peer and workload (median reported)
    warmup: int = 2  # calls after the first, untimed
    dispatch_calls: int = 2000  # calls per sample for per-call workloads (W6, R1)

    @classmethod
    def quick(cls, size: str) -> Settings:
        return cls(size=size, repeats=3, warmup=1, dispatch_calls=200)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def error_text(e: BaseException, limit: int = 2000) -> str:
    """`Type: message (at file:line)` of the innermost frame, the message cut at `limit`."""
    tb = traceback.extract_tb(e.__traceback__)
    where = f" (at {tb[-1].filename}:{tb[-1].lineno})" if tb else ""
    text = f"{type(e).__name__}: {e}".strip()
    return (text if len(text) <= limit else text[:limit] + " ...") + where


def make_peers(names: list[str]) -> tuple[list[Peer], dict]:
    """The peer objects and, per peer, availability, reason and versions."""
    out: list[Peer] = []
    info: dict = {}
    for name in names:
        for p in peer_registry.make(name):
            reason = p.unavailable()
            entry: dict = {"available": reason is None, "reason": reason}
            if reason is None:
                try:
                    entry["info"] = p.info()
                except Exception as e:  # noqa: BLE001 - info is best effort
                    entry["info"] = {"error": error_text(e)}
            info[p.name] = entry
            out.append(p)
    return out, info


def run_one(p: Peer, w: Workload, inputs: tuple, refs: tuple, expected: tuple, s: Settings) -> dict:
    try:
        run = p.prepare(w, inputs)
    except NotExpressible as e:
        return {"status": "not_expressible", "reason": str(e)}
    except Exception as e:  # noqa: BLE001 - a failing peer is recorded, not fatal
        return {"status": "error", "stage": "prepare", "error": error_text(e)}
    try:
        t0 = time.perf_counter()
        out = run()
        first_ms = (time.perf_counter() - t0) * 1e3
        verdict = check(p.to_numpy(out), refs, expected)
        del out
    except Exception as e:  # noqa: BLE001
        return {"status": "error", "stage": "first call", "error": error_text(e), **_stats(p, run)}
    first_stats = _stats(p, run)
    try:
        timing = measure(
            run, repeats=s.repeats, warmup=s.warmup, inner=s.dispatch_calls if w.per_call else 1
        )
    except Exception as e:  # noqa: BLE001
        return {
            "status": "error",
            "stage": "timed calls",
            "error": error_text(e),
            "check": verdict,
            "first_call_ms": first_ms,
            **_stats(p, run),
        }
    out = {
        "status": "ok" if verdict["ok"] else "check_failed",
        "check": verdict,
        "first_call_ms": first_ms,
        **timing,
        **_stats(p, run),
    }
    if first_stats:
        out["stats_first_call"] = first_stats["stats"]
    return out


def _stats(p: Peer, run) -> dict:
    """{"stats": the peer's counters} (lowering's fn.stats), or {} when it has none."""
    try:
        st = p.stats(run)
    except Exception as e:  # noqa: BLE001 - counters are best effort
        st = {"error": error_text(e)}
    return {"stats": st} if st is not None else {}


def run_suite(keys: list[str], peers: list[Peer], peer_info: dict, s: Settings) -> dict:
    """{workload key: {name, bytes, results: {peer: result}}}."""
    out = {}
    for key in keys:
        w = WORKLOADS[key]
        inputs = w.inputs(s.size)
        expected = as_tuple(w.fn(*inputs))
        refs = reference(w, inputs)
        entry = {
            "name": w.name,
            "unit": w.unit,
            "memory_bound": w.memory_bound,
            "inputs": [f"{a.dtype}{list(a.shape)}" for a in inputs],
            "outputs": [f"{o.dtype}{list(o.shape)}" for o in expected],
            "bytes": traffic_bytes(inputs, expected),
            "per_call": w.per_call,
            "real_program": w.real_program,
            "target": list(w.target) if w.target else None,
            "results": {},
        }
        for p in peers:
            if not peer_info[p.name]["available"]:
                r = {"status": "unavailable", "reason": peer_info[p.name]["reason"]}
            else:
                r = run_one(p, w, inputs, refs, expected, s)
            entry["results"][p.name] = r
            log(f"{key} {w.name:<22} {p.name:<16} {describe(r, w)}")
        out[key] = entry
        del inputs, expected, refs
    return out


def describe(r: dict, w: Workload) -> str:
    if "median_ms" in r:
        t = r["median_ms"] * (1e3 if w.unit == "us" else 1)
        extra = (
            "" if r["status"] == "ok" else "  CHECK FAILED: " + "; ".join(r["check"]["problems"])
        )
        breaks = (r.get("stats") or {}).get("graph_breaks")
        extra += f"  graph breaks {breaks}" if breaks is not None else ""
        return f"{t:10.3f} {w.unit}  (first call {r['first_call_ms']:.0f} ms){extra}"
    return f"{r['status']}: {r.get('error') or r.get('reason')}"[:300]


def lowering_reference(results: dict) -> str | None:
    """The lowering column ratios are taken against: the first lowering
    backend (cpu before numpy) whose output passed the check."""
    names = [n for n in results if n.startswith("lowering[")]
    for want in ("ok", "check_failed"):
        for n in names:
            if results[n]["status"] == want:
                return n
    return None


def derive(suite: dict, bandwidth_gbs: float, ref_suite: dict | None = None) -> None:
    """Adds roofline, % of roofline, the lowering reference, ratios (peer /
    lowering), and the best non-lowering peer. `ref_suite` takes the
    lowering times from another run (alloc-reuse ratios use the main run's)."""
    for key, e in suite.items():
        e["roofline_ms"] = e["bytes"] / (bandwidth_gbs * 1e9) * 1e3
        res = e["results"]
        for r in res.values():
            if "median_ms" in r:
                r["pct_roofline"] = 100 * e["roofline_ms"] / r["median_ms"]
        src = (ref_suite or suite).get(key, e)["results"]
        ref = lowering_reference(src)
        e["lowering_reference"] = ref
        base = src[ref]["median_ms"] if ref else None
        e["ratios"] = {
            n: (r["median_ms"] / base if base and "median_ms" in r else None)
            for n, r in res.items()
        }
        peers_ok = {
            n: r["median_ms"]
            for n, r in res.items()
            if r["status"] == "ok" and not n.startswith("lowering[")
        }
        e["best_peer"] = min(peers_ok, key=peers_ok.get) if peers_ok else None
        if e.get("target"):
            e["target_result"] = target_result(e["target"], base, res)


def target_result(target: list, lowering_ms: float | None, res: dict) -> dict:
    """A workload's goal `lowering ≤ factor × peer`: the ratio lowering /
    peer (against the lowering reference) and whether it is met."""
    peer, factor = target
    other = res.get(peer, {})
    if lowering_ms is None or "median_ms" not in other:
        return {"peer": peer, "factor": factor, "ratio": None, "met": None}
    ratio = lowering_ms / other["median_ms"]
    return {"peer": peer, "factor": factor, "ratio": ratio, "met": ratio <= factor}


def settings_dict(s: Settings) -> dict:
    return asdict(s)
