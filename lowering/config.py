"""All knobs in one place, with environment overrides and a context manager.

Environment:
  LOWERING_LOGS=graph,guards,recompiles,graph_breaks   log channels (or "all"; also passes:
                                                       each pass's time, perf: every stage's
                                                       time, emission and JIT included; cache:
                                                       the on-disk cache's hits and writes)
  LOWERING_RECOMPILE_LIMIT=8                           recompiles before eager
  LOWERING_BACKEND=cpu                                 default backend (cpu | numpy)
  LOWERING_PARTITION=min_cut                           forward/backward cut (min_cut | save_all)
  LOWERING_NATIVE_ENTRY=0                              no JIT-compiled entry for cached calls
                                                       (runtime/native.py; on by default)
  LOWERING_THREADS=n                                   kernel threads (default: all cores)
  LOWERING_NATIVE_POOL=0                               split kernels through a Python thread
                                                       pool (runtime/pool.py; native by default)
  LOWERING_VECTOR_BITS=256                             vectorize for this SIMD width (128 | 256
                                                       | 512; default: the host's)
  LOWERING_CACHE=0                                     no on-disk compile cache (runtime/disk_cache.py)
  LOWERING_CACHE_DIR=path                              its directory (default $XDG_CACHE_HOME/lowering,
                                                       else ~/.cache/lowering)
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass, field, fields

LOG_CHANNELS = ("graph", "guards", "recompiles", "graph_breaks", "passes", "perf", "cache")


@dataclass
class Config:
    recompile_limit: int = field(default_factory=lambda: int(os.environ.get("LOWERING_RECOMPILE_LIMIT", 8)))
    backend: str = field(default_factory=lambda: os.environ.get("LOWERING_BACKEND", "cpu"))
    # how joint forward+backward functions are cut: "min_cut" | "save_all"
    partition: str = field(default_factory=lambda: os.environ.get("LOWERING_PARTITION", "min_cut"))
    verify_each_pass: bool = field(default_factory=lambda: os.environ.get("LOWERING_VERIFY", "0") == "1")


config = Config()


@contextlib.contextmanager
def patch(**changes):
    """`with lowering.config.patch(recompile_limit=2): ...`"""
    old = {f.name: getattr(config, f.name) for f in fields(config)}
    for k, v in changes.items():
        if k not in old:
            raise AttributeError(f"unknown config option {k!r}")
        setattr(config, k, v)
    try:
        yield config
    finally:
        for k, v in old.items():
            setattr(config, k, v)


def logger(channel: str) -> logging.Logger:
    return logging.getLogger(f"lowering.{channel}")


def _setup_logs() -> None:
    spec = os.environ.get("LOWERING_LOGS", "")
    wanted = {c.strip() for c in spec.split(",") if c.strip()}
    if "all" in wanted:
        wanted = set(LOG_CHANNELS)
    for ch in wanted:
        if ch not in LOG_CHANNELS:
            raise ValueError(f"LOWERING_LOGS: unknown channel {ch!r} (known: {', '.join(LOG_CHANNELS)})")
    if wanted:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        for ch in wanted:
            lg = logger(ch)
            lg.setLevel(logging.DEBUG)
            lg.addHandler(handler)


_setup_logs()
