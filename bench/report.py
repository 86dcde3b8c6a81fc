"""The three outputs of a run: JSON (everything), Markdown tables, PNG chart."""

from __future__ import annotations

import json
import math
from pathlib import Path

STATUS_MARK = {"not_expressible": "–", "unavailable": "n/a", "error": "err"}


def fmt(x: float | None, digits: int = 3) -> str:
    """Three significant digits, no exponent for the ranges shown here."""
    if x is None or not math.isfinite(x):
        return "–"
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"


def _scale(unit: str) -> float:
    return 1e3 if unit == "us" else 1.0


def _columns(suite: dict) -> list[str]:
    cols: list[str] = []
    for e in suite.values():
        for n in e["results"]:
            if n not in cols:
                cols.append(n)
    return cols


class Notes:
    """Footnotes: one number per distinct text, listing the workloads it
    applies to (the same error on every workload is one note)."""

    def __init__(self):
        self.texts: dict[str, list[str]] = {}

    def ref(self, text: str, key: str = "") -> str:
        keys = self.texts.setdefault(text, [])
        if key and key not in keys:
            keys.append(key)
        return f"[{list(self.texts).index(text) + 1}]"

    def lines(self) -> list[str]:
        return [
            f"{i + 1}. " + (", ".join(keys) + ": " if keys else "") + t
            for i, (t, keys) in enumerate(self.texts.items())
        ]


def _cell(key: str, peer: str, r: dict, unit: str, notes: Notes) -> str:
    if "median_ms" in r:
        t = fmt(r["median_ms"] * _scale(unit))
        if r["status"] == "check_failed":
            problems = "; ".join(r["check"]["problems"])
            return f"{t} ✗{notes.ref(f'{peer}: check failed: {problems}', key)}"
        return t
    mark = STATUS_MARK.get(r["status"], r["status"])
    text = r.get("error") or r.get("reason") or ""
    if r["status"] == "unavailable":
        return mark + notes.ref(_short(f"{peer} unavailable: {text}"))
    stage = f" ({r['stage']})" if r.get("stage") else ""
    return mark + notes.ref(_short(f"{peer}{stage}: {text}"), key)


def _short(text: str, n: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n] + " …"


def times_table(suite: dict, notes: Notes, title: str) -> list[str]:
    cols = _columns(suite)
    out = [
        f"### {title}",
        "",
        "| workload | roofline | " + " | ".join(cols) + " | best peer |",
        "|---|" + "---|" * (len(cols) + 2),
    ]
    for key, e in suite.items():
        unit = e["unit"]
        roof = fmt(e["roofline_ms"] * _scale(unit)) if e["memory_bound"] else "–"
        cells = [
            _cell(key, c, e["results"][c], unit, notes) if c in e["results"] else "" for c in cols
        ]
        best = e.get("best_peer")
        best_txt = (
            f"{fmt(e['results'][best]['median_ms'] * _scale(unit))} ({best})" if best else "–"
        )
        name = f"{key} {e['name']}" + (" (µs)" if unit == "us" else "")
        out.append(f"| {name} | {roof} | " + " | ".join(cells) + f" | {best_txt} |")
    return out + [""]


def ratio_table(suite: dict, title: str) -> list[str]:
    cols = [c for c in _columns(suite)]
    out = [
        f"### {title}",
        "",
        "| workload | lowering reference | " + " | ".join(cols) + " | best peer |",
        "|---|---|" + "---|" * (len(cols) + 1),
    ]
    for key, e in suite.items():
        ref = e.get("lowering_reference")
        best = e.get("best_peer")
        cells = [fmt(e["ratios"].get(c)) for c in cols]
        best_txt = fmt(e["ratios"].get(best)) if best else "–"
        out.append(
            f"| {key} {e['name']} | {ref or 'none passed'} | "
            + " | ".join(cells)
            + f" | {best_txt} |"
        )
    return out + [""]


def _target_text(e: dict) -> str:
    t = e.get("target_result")
    if not t:
        return "–"
    goal = f"≤ {fmt(t['factor'], 2)}× {t['peer']}"
    if t["ratio"] is None:
        return f"{goal}: no time to compare"
    return f"{goal}: {fmt(t['ratio'])}× — " + ("met" if t["met"] else "**not met**")


def _counters(stats: dict) -> str:
    """The counters as text; cache hits left out (they grow with the calls)."""
    parts = []
    for k, v in stats.items():
        if k == "cache_hits":
            continue
        if isinstance(v, list):
            v = "; ".join(map(str, v)) or "none"
        parts.append(f"{k.replace('_', ' ')} {v}")
    return ", ".join(parts)


def real_programs_table(suite: dict, notes: Notes) -> list[str]:
    """R1–R3: every peer's first call (compile included), the graph breaks
    of lowering and torch.compile (their counters in the notes), and the
    workload's target."""
    rows = {k: e for k, e in suite.items() if e.get("real_program")}
    if not rows:
        return []
    cols = _columns(rows)
    counted = [c for c in cols if c.startswith("lowering[") or c == "torch"]
    out = [
        "### Real programs: first call, ms (compile included); graph breaks; target",
        "",
        "| workload | " + " | ".join(cols) + " | graph breaks | target (lowering reference) |",
        "|---|" + "---|" * (len(cols) + 2),
    ]
    for key, e in rows.items():
        cells = []
        for c in cols:
            r = e["results"].get(c, {})
            cells.append(fmt(r["first_call_ms"]) if "first_call_ms" in r else "–")
        breaks = []
        for c in counted:
            st = e["results"].get(c, {}).get("stats")
            if not st or "graph_breaks" not in st:
                continue
            ref = notes.ref(f"{c} counters after the timed calls: {_counters(st)}", key)
            breaks.append(f"{c} {st['graph_breaks']}{ref}")
        out.append(
            f"| {key} {e['name']} | "
            + " | ".join(cells)
            + f" | {', '.join(breaks) or '–'} | {_target_text(e)} |"
        )
    return out + [""]


def roofline_table(suite: dict, bandwidth: float) -> list[str]:
    rows = {k: e for k, e in suite.items() if e["memory_bound"]}
    if not rows:
        return []
    cols = _columns(rows)
    out = [
        (
            f"### % of copy roofline ({fmt(bandwidth)} GB/s; bytes = inputs read once + "
            "outputs written once)"
        ),
        "",
        "| workload | MiB moved | roofline ms | " + " | ".join(cols) + " |",
        "|---|---|---|" + "---|" * len(cols),
    ]
    for key, e in rows.items():
        cells = [fmt(e["results"].get(c, {}).get("pct_roofline"), 2) for c in cols]
        out.append(
            f"| {key} {e['name']} | {fmt(e['bytes'] / 2**20)} | {fmt(e['roofline_ms'])} | "
            + " | ".join(cells)
            + " |"
        )
    return out + [""]


def compile_table(cl: dict, notes: Notes) -> list[str]:
    if not cl or not cl.get("peers"):
        return []
    keys = sorted({k for p in cl["peers"].values() for k in p["workloads"]})
    out = [
        "### Compile latency (first call − steady state, s; fresh process / warm process)",
        "",
        "| peer | import s | " + " | ".join(f"{k} fresh | {k} warm" for k in keys) + " |",
        "|---|---|" + "---|---|" * len(keys),
    ]
    for name, p in cl["peers"].items():
        cells = []
        for k in keys:
            for proc in ("fresh", "warm"):
                e = p["workloads"].get(k, {}).get(proc)
                if e is None:
                    cells.append("–")
                elif "error" in e:
                    cells.append(
                        "err" + notes.ref(_short(f"compile latency {name}: {e['error']}"), k)
                    )
                else:
                    cells.append(fmt(e["compile_ms"] / 1e3))
        if p.get("errors"):
            cells[-1] += notes.ref(_short(f"compile latency {name}: " + "; ".join(p["errors"])))
        out.append(f"| {name} | {fmt(p.get('import_s'))} | " + " | ".join(cells) + " |")
    imp = cl.get("import_time", {})
    if "lowering_after_numpy_s" in imp:
        out += [
            "",
            (
                f"`import lowering` (after numpy, fresh interpreter, median of {imp['runs']}): "
                f"{fmt(imp['lowering_after_numpy_s'])} s; `import numpy`: {fmt(imp['numpy_s'])} s."
            ),
        ]
    elif imp:
        out += ["", f"`import lowering` failed: {_short(imp.get('error', ''))}"]
    return out + [""]


def markdown(res: dict) -> str:
    env, bw = res["environment"], res["copy_bandwidth"]
    notes = Notes()
    tp = ", ".join(
        " ".join(str(t[k]) for k in ("prefix", "version", "architecture") if t.get(k))
        + f" ×{t.get('num_threads')}"
        for t in res.get("threadpools", [])
        if "internal_api" in t
    )
    versions = ", ".join(
        f"{n} {p['info'].get('version')}"
        for n, p in res["peers"].items()
        if p["available"] and "info" in p and not n.startswith("lowering[")
    )
    # the per-call workloads (W6, R1), named where their unit is explained
    per_call = ", ".join(k for k, e in res["workloads"].items() if e["unit"] == "us")
    calls = res["settings"]["dispatch_calls"]
    title = "Median time, ms" + (f" ({per_call}: µs per call)" if per_call else "")
    sampling = f" ({per_call}: {calls} calls per sample)" if per_call else ""
    lines = [
        f"# CPU benchmark — {env['host']}",
        "",
        f"`{res['command']}` — {res['created']}, {res['elapsed_s']:.0f} s.",
        "",
        (
            f"- CPU: {env['cpu_model']}, {env['affinity']} threads usable "
            f"({' '.join(env['cpu_flags'])}); {env.get('mem_total', '?')}"
        ),
        (
            f"- Copy bandwidth (np.copyto, {bw['buffer_mib']} MiB, read+write counted): "
            f"1 thread {fmt(bw['threads_1_gbs'])} GB/s, 2 threads {fmt(bw['threads_2_gbs'])} GB/s; "
            f"roofline uses {fmt(bw['roofline_gbs'])} GB/s"
        ),
        f"- Python {env['python']}, numpy {env['numpy']}; {versions}",
        (
            f"- Thread pools: {tp or 'n/a'}; OPENBLAS env removed for the run: "
            f"{env['openblas_env_removed'] or 'none was set'}"
        ),
        f"- Load average at start: {_load(env.get('loadavg_start'))}; other processes used "
        f"{fmt(100 * env.get('others_cpu_share', 0), 2)}% of the machine's CPU during the run"
        + (" — **the machine was not quiet: timings are noisy**" if _busy(env) else ""),
        (
            f"- Sizes: {res['settings']['size']}; median of {res['settings']['repeats']} calls after "
            f"{1 + res['settings']['warmup']} warm-up calls{sampling}; "
            "check: rtol 1e-4, atol 1e-6·max|ref| vs float64 numpy"
        ),
        "",
    ]
    lines += times_table(res["workloads"], notes, title)
    lines += ratio_table(
        res["workloads"], "Ratio peer time / lowering time (> 1: lowering is faster)"
    )
    lines += real_programs_table(res["workloads"], notes)
    lines += roofline_table(res["workloads"], bw["roofline_gbs"])
    if res.get("alloc_reuse"):
        ar = res["alloc_reuse"]
        if "workloads" in ar:
            lines += times_table(
                ar["workloads"],
                notes,
                "With allocator reuse forced (GLIBC_TUNABLES, subprocess): median ms",
            )
            lines += ratio_table(
                ar["workloads"], "With allocator reuse: peer time / lowering time of the main run"
            )
        else:
            lines += [
                "### With allocator reuse forced",
                "",
                f"failed: {_short(ar.get('error', ''))}",
                "",
            ]
    lines += compile_table(res.get("compile_latency", {}), notes)
    if notes.texts:
        lines += ["### Notes", "", *notes.lines(), ""]
    return "\n".join(lines)


def _load(la) -> str:
    return "?" if not la else fmt(la[0], 2)


def _busy(env: dict) -> bool:
    """Other processes took more than 10% of the machine during the run."""
    return env.get("others_cpu_share", 0) > 0.10


def write_json(res: dict, path: Path) -> None:
    path.write_text(json.dumps(res, indent=1, default=str) + "\n")


def write_png(res: dict, path: Path) -> str | None:
    """Two panels: median time per workload and peer (log), and the ratio
    peer / lowering (log, 1 marked). Returns an error text if matplotlib fails."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001 - the chart is optional
        return f"matplotlib unavailable: {e}"
    suite = res["workloads"]
    keys = list(suite)
    cols = _columns(suite)
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 1.6 * len(keys) + 3), 8), sharex=True)
    width = 0.8 / max(1, len(cols))
    for j, c in enumerate(cols):
        xs, ts, rs, failed = [], [], [], []
        for i, k in enumerate(keys):
            r = suite[k]["results"].get(c, {})
            if "median_ms" in r:
                xs.append(i + (j - (len(cols) - 1) / 2) * width)
                ts.append(r["median_ms"])
                rs.append(suite[k]["ratios"].get(c) or float("nan"))
                failed.append(r["status"] != "ok")
        hatch = ["//" if f else "" for f in failed]
        bars = axes[0].bar(xs, ts, width, label=c, color=f"C{j}")
        bars2 = axes[1].bar(xs, rs, width, color=f"C{j}")
        for b, h in zip([*bars, *bars2], hatch * 2):
            b.set_hatch(h)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("median time, ms (log)")
    axes[0].set_title(
        f"{res['environment']['host']}: {res['environment']['cpu_model']} "
        f"({res['settings']['size']} sizes; hatched = check failed)"
    )
    axes[0].legend(fontsize=8, ncol=min(4, len(cols)))
    axes[1].set_yscale("log")
    axes[1].axhline(1.0, color="k", lw=0.8)
    axes[1].set_ylabel("peer time / lowering reference time (log)")
    axes[1].set_xticks(range(len(keys)), [f"{k}\n{suite[k]['name']}" for k in keys], fontsize=8)
    for ax in axes:
        ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
