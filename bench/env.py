"""The run's environment: what is set before the peers are imported, and
what the JSON records about the machine.

OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE: some machines of this workplace set
them because old OpenBLAS builds misbehave on their processors; they slow a
current numpy. The bench therefore re-runs itself with both unset (in its
own process only: nothing else changes) and records the values it found and
the BLAS kernel numpy then runs (threadpoolctl). `--keep-openblas-env`
keeps them."""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
import tempfile
import time

OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
ORIGINAL_OPENBLAS = "BENCH_ORIGINAL_OPENBLAS_ENV"  # what the re-exec found
ALLOC_REUSE_TUNABLES = (
    "glibc.malloc.mmap_threshold=4294967295:glibc.malloc.trim_threshold=4294967295"
)
RECORDED_VARS = (
    *OPENBLAS_VARS,
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "NUMEXPR_MAX_THREADS",
    "NUMEXPR_NUM_THREADS",
    "XLA_FLAGS",
    "JAX_PLATFORMS",
    "GLIBC_TUNABLES",
    "LOWERING_BACKEND",
    "TORCHINDUCTOR_CACHE_DIR",
)


def reexec_without_openblas_overrides(argv: list[str]) -> None:
    """Replace this process by the same command with OPENBLAS_CORETYPE and
    OPENBLAS_L2_SIZE unset, when either is set (they are read at load time
    of OpenBLAS, so unsetting them later would change nothing)."""
    found = {k: os.environ[k] for k in OPENBLAS_VARS if k in os.environ}
    if not found:
        return
    env = {k: v for k, v in os.environ.items() if k not in OPENBLAS_VARS}
    env[ORIGINAL_OPENBLAS] = json.dumps(found)
    print(
        f"bench: re-running without {', '.join(found)} (found {found}); "
        "--keep-openblas-env keeps them",
        file=sys.stderr,
    )
    os.execve(sys.executable, [sys.executable, "-m", "bench", *argv], env)


def set_peer_defaults() -> str:
    """Settings that must precede the peers' imports. Returns the fresh
    Inductor cache folder (the caller removes it)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # no probing for accelerators
    cache = tempfile.mkdtemp(prefix="bench-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    return cache


def host() -> str:
    return socket.gethostname().split(".")[0] or "host"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return sorted(f for f in flags if f.startswith(("avx", "fma", "sse4")))
    except OSError:
        pass
    return []


def describe() -> dict:
    """Machine, Python, numpy, thread pools and the variables that matter."""
    import numpy as np

    out: dict = {
        "host": host(),
        "cpu_model": cpu_model(),
        "cpu_flags": cpu_flags(),
        "cpu_count": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "loadavg_start": os.getloadavg(),
        "env": {k: os.environ.get(k) for k in RECORDED_VARS},
        "openblas_env_removed": json.loads(os.environ.get(ORIGINAL_OPENBLAS, "{}")),
    }
    try:
        with open("/proc/meminfo") as f:
            out["mem_total"] = f.readline().split(":", 1)[1].strip()
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            out["transparent_hugepages"] = f.read().strip()
    except OSError:
        pass
    return out


def cpu_snapshot() -> tuple[float, float, float]:
    """(wall s, CPU s busy on the whole machine, CPU s used by this process
    and its waited-for children): two snapshots tell how much of the
    machine other processes took during the run."""
    import resource

    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # all but idle and iowait
    own = sum(
        getattr(resource.getrusage(w), k)
        for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        for k in ("ru_utime", "ru_stime")
    )
    return time.time(), busy / os.sysconf("SC_CLK_TCK"), own


def others_share(start: tuple[float, float, float], end: tuple[float, float, float]) -> float:
    """Fraction of the machine's cores (0..1) that other processes used."""
    wall = max(end[0] - start[0], 1e-9)
    other = (end[1] - start[1]) - (end[2] - start[2])
    return max(0.0, other) / (wall * (os.cpu_count() or 1))


def threadpools() -> list[dict]:
    """threadpoolctl's view of the BLAS/OpenMP pools loaded by now."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError as e:
        return [{"error": f"threadpoolctl missing: {e}"}]
    return threadpool_info()
