"""torch.compile of the numpy function itself (BENCH.md's "numpy fn"):
dynamo traces the numpy calls into torch ops and Inductor compiles them;
the compiled function takes and returns numpy arrays, like lowering.

Inductor's on-disk cache goes to a fresh folder per bench run (set by
bench.env before torch is imported), so a first call is a real compile.

Dynamo's counters (graph breaks and their reasons, frames compiled) are
recorded per workload: R1/R2's data-dependent `if` is a graph break, and on
R3 dynamo cannot trace `x.dtype` before the loop and runs the whole function
eagerly (no frame compiled)."""

from __future__ import annotations

from .base import Peer


class TorchPeer(Peer):
    name = "torch"
    module = "torch"
    compiles = True

    def info(self):
        import torch

        return {
            "version": torch.__version__,
            "threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(),
            "parallel_info": torch.__config__.parallel_info().strip().splitlines()[:8],
        }

    def prepare(self, w, inputs):
        import torch

        if w.key == "W8":  # torch's own autodiff of the same forward, compiled
            from ..models import torch_models

            loss = torch_models()["mlp_loss"]
            step = torch.compile(torch.func.grad_and_value(loss, argnums=(2, 3, 4, 5)))
            ts = [torch.from_numpy(a) for a in inputs]

            def run():
                grads, value = step(*ts)
                return (value.numpy(), *[g.numpy() for g in grads])

            return run
        _dynamo_counters(clear=True)  # this workload's compile counts from here on
        fn = torch.compile(w.fn)
        return lambda: fn(*inputs)

    def stats(self, run):
        # dynamo's counters since prepare: the runner runs one peer and
        # workload at a time, so they are this workload's
        c = _dynamo_counters()
        if c is None:
            return None
        frames = c.get("frames", {})
        reasons = c.get("unimplemented", {})
        return {
            "graph_breaks": sum(reasons.values()),
            "frames_compiled": frames.get("ok", 0),
            "frames_seen": frames.get("total", 0),
            "graphs": c.get("stats", {}).get("unique_graphs", 0),
            "break_reasons": [r.splitlines()[0] for r in reasons],
        }


def _dynamo_counters(clear: bool = False) -> dict | None:
    """torch._dynamo's global counters (a private API: None when it moves)."""
    try:
        from torch._dynamo.utils import counters
    except Exception:  # noqa: BLE001
        return None
    if clear:
        counters.clear()
    return {k: dict(v) for k, v in counters.items()}
