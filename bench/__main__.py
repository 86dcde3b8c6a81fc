"""`python -m bench`: the CPU workloads of shared/BENCH.md on every peer
installed here, in one process; writes bench/results/<host>-cpu.{json,md,png}.
`python -m bench --programs` runs the real-programs benchmark of
bench/programs instead (its options: `python -m bench --programs --help`);
`python -m bench --gpu` the GPU workloads on a CUDA device (bench/gpu.py).

See bench/README.md. Nothing heavy is imported before the OpenBLAS
variables are dealt with (bench.env)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from . import env

ALL_WORKLOADS = ("W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "R1", "R2", "R3")
ALL_PEERS = ("lowering", "numpy", "numexpr", "numba", "jax", "torch")
COMPILE_LATENCY_WORKLOADS = ("W1", "W5")
RESULTS = Path(__file__).resolve().parent / "results"


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--only",
        default=",".join(ALL_WORKLOADS),
        help="workloads, comma-separated (default: all): W1,...,W8,R1,R2,R3",
    )
    ap.add_argument(
        "--peers",
        default=",".join(ALL_PEERS),
        help="peers, comma-separated (default: all); lowering is always run, "
        "since ratios are taken against it",
    )
    ap.add_argument(
        "--sizes",
        choices=("full", "small"),
        default="full",
        help="full: BENCH.md's sizes; small: 512x512 rows, a small MLP, 64K options, "
        "R2 on 64K elements, R3 on 256 columns",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="3 samples, 1 warm-up call, compile latency of lowering only: a smoke run",
    )
    ap.add_argument("--repeats", type=int, help="timed samples (default 10; --quick 3)")
    ap.add_argument(
        "--alloc-reuse",
        action="store_true",
        help="also run the peers in a subprocess with glibc keeping big blocks "
        "(GLIBC_TUNABLES mmap/trim thresholds), as in BENCH.md's allocator note",
    )
    ap.add_argument(
        "--compile-latency",
        choices=("all", "lowering", "none"),
        help="which peers get the fresh-process compile-latency runs "
        "(default all; --quick: lowering)",
    )
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    ap.add_argument(
        "--keep-openblas-env",
        action="store_true",
        help="keep OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE instead of re-running without them",
    )
    ap.add_argument(
        "--programs",
        action="store_true",
        help="the real numpy programs of bench/programs instead of W1–W8/R1–R3 "
        "(options: python -m bench --programs --help)",
    )
    ap.add_argument(
        "--gpu",
        action="store_true",
        help="the GPU workloads on a CUDA device instead (options: python -m bench --gpu --help)",
    )
    ap.add_argument("--child-json", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.only = [k.strip().upper() for k in a.only.split(",") if k.strip()]
    bad = [k for k in a.only if k not in ALL_WORKLOADS]
    if bad:
        ap.error(f"unknown workload(s) {bad}; known: {', '.join(ALL_WORKLOADS)}")
    a.peers = [p.strip().lower() for p in a.peers.split(",") if p.strip()]
    bad = [p for p in a.peers if p not in ALL_PEERS]
    if bad:
        ap.error(f"unknown peer(s) {bad}; known: {', '.join(ALL_PEERS)}")
    if "lowering" not in a.peers:
        a.peers.insert(0, "lowering")
    if a.compile_latency is None:
        a.compile_latency = "lowering" if a.quick else "all"
    return a


def stem(a: argparse.Namespace) -> str:
    """`<host>-cpu`, with -small / -quick for runs that are not the real one."""
    return (
        f"{env.host()}-cpu"
        + ("-small" if a.sizes == "small" else "")
        + ("-quick" if a.quick else "")
    )


def forwarded_args(a: argparse.Namespace) -> list[str]:
    out = ["--only", ",".join(a.only), "--peers", ",".join(a.peers), "--sizes", a.sizes]
    if a.quick:
        out.append("--quick")
    if a.repeats:
        out += ["--repeats", str(a.repeats)]
    return out


def run_alloc_reuse(a: argparse.Namespace) -> dict:
    """The same peers in a subprocess whose glibc never unmaps big blocks."""
    with tempfile.TemporaryDirectory(prefix="bench-reuse-") as d:
        path = Path(d) / "reuse.json"
        cmd = [
            sys.executable,
            "-m",
            "bench",
            *forwarded_args(a),
            "--child-json",
            str(path),
            "--keep-openblas-env",
        ]
        child_env = dict(os.environ, GLIBC_TUNABLES=env.ALLOC_REUSE_TUNABLES)
        p = subprocess.run(cmd, check=False, env=child_env, stdout=subprocess.PIPE, text=True)
        if p.returncode != 0 or not path.exists():
            return {
                "error": f"subprocess exit {p.returncode}",
                "glibc_tunables": env.ALLOC_REUSE_TUNABLES,
            }
        out = json.loads(path.read_text())
        out["glibc_tunables"] = env.ALLOC_REUSE_TUNABLES
        return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--programs" in argv:
        return programs(argv)
    if "--gpu" in argv:  # the GPU workloads on a CUDA device (bench/gpu.py)
        from . import gpu

        return gpu.main([x for x in argv if x != "--gpu"])
    a = parse(argv)
    if not a.keep_openblas_env:
        env.reexec_without_openblas_overrides(argv)
    cache = env.set_peer_defaults()
    try:
        return _main(a, argv)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def programs(argv: list[str]) -> int:
    """`--programs`: bench.programs.run with the rest of the arguments, after
    the same OpenBLAS re-execution and peer settings as the main bench."""
    rest = [x for x in argv if x not in ("--programs", "--keep-openblas-env")]
    if "--keep-openblas-env" not in argv and not {"-h", "--help"} & set(rest):
        env.reexec_without_openblas_overrides(argv)
    cache = env.set_peer_defaults()
    try:
        from .programs import run

        return run.main(rest)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _main(a: argparse.Namespace, argv: list[str]) -> int:
    from . import compile_latency, report, runner
    from .timing import MiB, copy_bandwidth

    t_start = time.perf_counter()
    s = runner.Settings.quick(a.sizes) if a.quick else runner.Settings(size=a.sizes)
    if a.repeats:
        s = dataclasses.replace(s, repeats=a.repeats)
    environment = env.describe()
    snap = env.cpu_snapshot()
    reps = 3 if a.quick else 10
    bw1 = copy_bandwidth(256 * MiB, reps, threads=1)
    bw2 = copy_bandwidth(256 * MiB, reps, threads=2)
    bandwidth = {
        "buffer_mib": 256,
        "threads_1_gbs": bw1,
        "threads_2_gbs": bw2,
        "roofline_gbs": max(bw1, bw2),
    }
    runner.log(f"copy bandwidth: {bw1:.1f} GB/s (1 thread), {bw2:.1f} GB/s (2 threads)")

    peers, peer_info = runner.make_peers(a.peers)
    suite = runner.run_suite(a.only, peers, peer_info, s)
    runner.derive(suite, bandwidth["roofline_gbs"])
    for p in peers:  # refresh: some report thread layers only after a run
        if peer_info[p.name]["available"]:
            try:
                peer_info[p.name]["info"] = p.info()
            except Exception as e:  # noqa: BLE001
                peer_info[p.name]["info"] = {"error": runner.error_text(e)}
    res = {
        "schema": 1,
        "command": "python -m bench " + " ".join(argv),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": runner.settings_dict(s),
        "environment": environment,
        "threadpools": env.threadpools(),
        "copy_bandwidth": bandwidth,
        "peers": peer_info,
        "workloads": suite,
    }
    if a.child_json:
        environment["others_cpu_share"] = env.others_share(snap, env.cpu_snapshot())
        a.child_json.write_text(json.dumps(res, default=str))
        return 0

    if a.alloc_reuse:
        runner.log("--- allocator reuse forced: the peers again in a subprocess ---")
        reuse = run_alloc_reuse(a)
        if "workloads" in reuse:
            runner.derive(reuse["workloads"], bandwidth["roofline_gbs"], ref_suite=suite)
        res["alloc_reuse"] = reuse

    if a.compile_latency != "none":
        keys = [k for k in COMPILE_LATENCY_WORKLOADS if k in a.only]
        names = [
            p.name
            for p in peers
            if p.compiles
            and peer_info[p.name]["available"]
            and (a.compile_latency == "all" or p.name.startswith("lowering["))
        ]
        cl: dict = {"workloads": keys, "size": s.size, "peers": {}}
        for name in names if keys else []:
            runner.log(f"compile latency: {name} ({', '.join(keys)}, fresh processes)")
            cl["peers"][name] = compile_latency.measure_peer(
                name, keys, s.size, 3 if a.quick else 5, rotations=not a.quick
            )
        runner.log("import time of lowering")
        cl["import_time"] = compile_latency.import_time(3 if a.quick else 5)
        res["compile_latency"] = cl

    environment["loadavg_end"] = os.getloadavg()
    environment["others_cpu_share"] = env.others_share(snap, env.cpu_snapshot())
    res["elapsed_s"] = time.perf_counter() - t_start
    a.out_dir.mkdir(parents=True, exist_ok=True)
    base = a.out_dir / stem(a)
    report.write_json(res, base.with_suffix(".json"))
    base.with_suffix(".md").write_text(report.markdown(res))
    png_err = report.write_png(res, base.with_suffix(".png"))
    runner.log(
        f"wrote {base}.json, {base}.md" + (f" (no PNG: {png_err})" if png_err else f", {base}.png")
    )
    print(base.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
