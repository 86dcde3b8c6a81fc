"""What every peer provides: availability, versions, and per workload a
zero-argument callable that computes the result (synchronously: a peer with
asynchronous dispatch waits for its result inside the callable)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..workloads import Workload, as_tuple


class NotExpressible(Exception):
    """The peer cannot express this workload; the message says why."""


class Peer:
    name: str = "?"  # column name in the tables
    module: str | None = None  # the package whose import decides availability
    compiles: bool = False  # whether first-call compile latency means anything

    def unavailable(self) -> str | None:
        """None when the peer can run here, else why not (an import error)."""
        if self.module is None:
            return None
        try:
            __import__(self.module)
        except Exception as e:  # noqa: BLE001 - any import failure disqualifies
            return f"{type(e).__name__}: {e}"
        return None

    def info(self) -> dict[str, Any]:
        """Versions and thread settings for the JSON."""
        if self.module is None:
            return {}
        mod = __import__(self.module)
        return {"version": getattr(mod, "__version__", "?")}

    def prepare(self, w: Workload, inputs: tuple) -> Callable[[], Any]:
        """A callable running the workload on inputs already in the peer's
        format; raises NotExpressible when the peer has no version of it."""
        raise NotImplementedError

    def stats(self, run: Callable[[], Any]) -> dict[str, Any] | None:
        """The peer's own counters for a callable from `prepare` (lowering's
        `fn.stats`: compiles, graph breaks, ...), or None."""
        return None

    def to_numpy(self, out: Any) -> tuple[np.ndarray, ...]:
        """The callable's result as numpy arrays, for the check."""
        return tuple(np.asarray(o) for o in as_tuple(out))
